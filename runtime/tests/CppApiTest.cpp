//===- CppApiTest.cpp - The C++ RAII wrapper (qopt/runtime.hpp) -----------===//
#include "qopt/runtime.hpp"

#include "TestUtil.h"

#include <vector>

extern "C" void qopt_test_sgd_f32_host(const void *, const int32_t *, int64_t,
                                       const float *, const float *const *,
                                       int64_t, int64_t);

using namespace qopt::test;

namespace {

TEST(CppApi, HostStepThroughTheWrapper) {
  qopt::Context ctx(QOPT_BACKEND_HOST, 0);
  EXPECT_STREQ(ctx.deviceInfo().arch, "host");
  qopt::Manifest m = qopt::Manifest::parse(sgdManifestJson(), "sgd.json");
  EXPECT_EQ(m.numStreams(), 2u);
  EXPECT_STREQ(m.stream(1).name, "g");
  EXPECT_STREQ(m.hyper(0).name, "lr");
  std::vector<float> u = m.evaluateUniforms({{"lr", 1.0}}, 1); // 1 * (1 - 0.5)
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0], 0.5f);
  auto layout = m.stateLayout(1000);
  EXPECT_EQ(layout[0].bytes, 4000u);

  qopt::Kernel k(ctx, m, qopt_test_sgd_f32_host);
  std::vector<float> p(3000, 1.0f), g(3000, 2.0f), p2(5, 4.0f), g2(5, 1.0f);
  qopt::TensorList list(2);
  list.add("a", 3000, {p.data(), g.data()}, {12000, 12000},
           {QOPT_DTYPE_F32, QOPT_DTYPE_F32});
  list.add("b", 5, {p2.data(), g2.data()}, {20, 20}, {QOPT_DTYPE_F32, QOPT_DTYPE_F32});
  k.step(list, {{"lr", 1.0}}, 1);
  EXPECT_EQ(p[0], 0.0f);   // 1 - 0.5 * 2
  EXPECT_EQ(p[2999], 0.0f);
  EXPECT_EQ(p2[4], 3.5f);  // 4 - 0.5 * 1
  EXPECT_EQ(k.manifest().info().num_uniforms, 1u);
  EXPECT_EQ(k.info().format, QOPT_BINARY_HOST);

  // Errors become exceptions carrying the status and the message.
  qopt::TensorList bad(2);
  bad.add("short", 3000, {p.data(), g.data()}, {12000, 11996},
          {QOPT_DTYPE_F32, QOPT_DTYPE_F32});
  try {
    k.step(bad, {}, 1);
    FAIL() << "expected qopt::Error";
  } catch (const qopt::Error &e) {
    EXPECT_EQ(e.status(), QOPT_ERROR_VALIDATION);
    EXPECT_STREQ(e.what(), "tensor 'short' (#0), stream 'g': the buffer holds 11996 bytes, "
                           "the step needs 12000 (3000 elements of f32)");
  }
  EXPECT_THROW(list.add("wrong", 1, {p.data()}), qopt::Error);
  // Sizes and dtypes: one per stream, for every tensor or for none; a list
  // that would silently go unchecked is refused as it is built, unchanged.
  auto refused = [](auto &&add, const char *message) {
    try {
      add();
      ADD_FAILURE() << "expected qopt::Error: " << message;
    } catch (const qopt::Error &e) {
      EXPECT_EQ(e.status(), QOPT_ERROR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  refused([&] { list.add("c", 5, {p2.data(), g2.data()}, {20, 20, 20}); },
          "tensor 'c': 3 buffer sizes (bytes), the kernel takes 2 streams");
  refused([&] { list.add("c", 5, {p2.data(), g2.data()}, {20, 20}, {QOPT_DTYPE_F32}); },
          "tensor 'c': 1 dtypes, the kernel takes 2 streams");
  refused([&] { list.add("c", 5, {p2.data(), g2.data()}); },
          "tensor 'c': no buffer sizes, but the tensors before it have them");
  refused([&] { list.add("c", 5, {p2.data(), g2.data()}, {20, 20}); },
          "tensor 'c': no dtypes, but the tensors before it have them");
  EXPECT_EQ(list.size(), 2u);
  qopt::TensorList plain(2);
  plain.add("a", 5, {p2.data(), g2.data()});
  refused([&] { plain.add("b", 5, {p2.data(), g2.data()}, {20, 20}); },
          "tensor 'b': buffer sizes given, but not for the tensors before it");
  EXPECT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain.view()->bytes, nullptr);
}

TEST(CppApi, ManifestErrorsThrow) {
  try {
    qopt::Manifest::parse("{\"format\": \"x\"}", "m.json");
    FAIL() << "expected qopt::Error";
  } catch (const qopt::Error &e) {
    EXPECT_EQ(e.status(), QOPT_ERROR_MANIFEST);
    EXPECT_STREQ(e.what(), "m.json: field 'format': \"x\" (expected \"qopt-manifest\")");
  }
  qopt::Registry reg;
  EXPECT_TRUE(reg.kernelNames().empty());
  reg.add(qopt::Manifest::parse(sgdManifestJson()));
  EXPECT_EQ(reg.kernelNames(), std::vector<std::string>{"qopt_test_sgd_f32"});
  EXPECT_THROW(reg.manifest("nope"), qopt::Error);
  // Handles move; the moved-from one is empty.
  qopt::Registry moved = std::move(reg);
  EXPECT_FALSE(static_cast<bool>(reg));
  EXPECT_TRUE(static_cast<bool>(moved));
}

} // namespace
