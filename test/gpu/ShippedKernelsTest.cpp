//===- ShippedKernelsTest.cpp - libqopt_kernels -------------------------===//
//
// The kernels embedded in libqopt_kernels register under their manifests'
// names; on a GPU each loads from its embedded binary and one steps.
//
//===----------------------------------------------------------------------===//

#include "qopt/kernels.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace {

TEST(ShippedKernels, EverySpecIsEmbeddedAndRegisters) {
  // 49 specs (10; FlashAdam/SGD/SGDW/Lion with 32-bit and no masters; the float32-state
  // specs of the Python package: flash_*_state32,
  // adamw_state32; RMSprop, Adagrad, Lion and AdEMAMix 8-bit and float32, AdamAtan2 with
  // float32 and bf16 states; AdamW4bit with and without stochastic rounding, FlashAdamW
  // with stochastic rounding, with 4-bit codes and with a Kahan compensation), each also
  // as .f16, .f32, .scaled, .f16.scaled, .f32.scaled.
  ASSERT_EQ(qopt_shipped_kernel_count(), 294u);
  std::set<std::string> specs;
  for (size_t i = 0; i < qopt_shipped_kernel_count(); ++i)
    specs.insert(qopt_shipped_kernel_spec(i));
  EXPECT_TRUE(specs.count("flash_adamw"));
  EXPECT_TRUE(specs.count("adamw8bit_block2048"));
  EXPECT_TRUE(specs.count("flash_adamw.f32"));
  EXPECT_TRUE(specs.count("adamw8bit_block256.f16.scaled"));
  EXPECT_TRUE(specs.count("adamw4bit_sr.f32"));
  EXPECT_EQ(qopt_shipped_kernel_spec(qopt_shipped_kernel_count()), nullptr);

  qopt_registry *registry = nullptr;
  ASSERT_EQ(qopt_registry_create(&registry), QOPT_SUCCESS);
  size_t added = 0;
  ASSERT_EQ(qopt_registry_add_shipped(registry, &added), QOPT_SUCCESS) << qopt_last_error();
  EXPECT_EQ(added, 294u);
  qopt_manifest *manifest = nullptr;
  ASSERT_EQ(qopt_registry_get_manifest(registry, "FlashAdamW", &manifest), QOPT_SUCCESS)
      << qopt_last_error();
  qopt_manifest_info info{};
  ASSERT_EQ(qopt_manifest_get_info(manifest, &info), QOPT_SUCCESS);
  EXPECT_STREQ(info.mode, "strict");
  EXPECT_EQ(info.num_streams, 7u);
  qopt_manifest_destroy(manifest);
  // The f32 variant has no error bits: 6 streams.
  ASSERT_EQ(qopt_registry_get_manifest(registry, "FlashAdamW_f32", &manifest), QOPT_SUCCESS)
      << qopt_last_error();
  ASSERT_EQ(qopt_manifest_get_info(manifest, &info), QOPT_SUCCESS);
  EXPECT_EQ(info.num_streams, 6u);
  EXPECT_EQ(info.param_dtype, QOPT_DTYPE_F32);
  EXPECT_EQ(info.grad_dtype, QOPT_DTYPE_F32);
  qopt_manifest_destroy(manifest);

  // Every kernel is registered before its manifest is parsed (under the name
  // CMake takes from its spec): each parses when asked for and names itself.
  size_t count = 0;
  ASSERT_EQ(qopt_registry_count(registry, &count), QOPT_SUCCESS);
  for (size_t i = 0; i < count; ++i) {
    const char *name = nullptr;
    ASSERT_EQ(qopt_registry_kernel_name(registry, i, &name), QOPT_SUCCESS);
    ASSERT_EQ(qopt_registry_get_manifest(registry, name, &manifest), QOPT_SUCCESS)
        << name << ": " << qopt_last_error();
    ASSERT_EQ(qopt_manifest_get_info(manifest, &info), QOPT_SUCCESS);
    EXPECT_STREQ(info.kernel, name);
    qopt_manifest_destroy(manifest);
  }

  // A second registration of the same kernels is refused, naming the first
  // kernel's manifest.
  EXPECT_NE(qopt_registry_add_shipped(registry, nullptr), QOPT_SUCCESS);
  const std::string first = std::string("<shipped>/") + qopt_shipped_kernel_spec(0) + ".manifest.json";
  EXPECT_NE(std::string(qopt_last_error()).find("is defined twice: " + first), std::string::npos)
      << qopt_last_error();
  qopt_registry_destroy(registry);
}

TEST(ShippedKernels, EachLoadsOnTheGpu) {
  int32_t devices = 0;
  if (qopt_cuda_device_count(&devices) != QOPT_SUCCESS || devices == 0)
    GTEST_SKIP() << "GPU test skipped: no CUDA driver or device";
  qopt_context *ctx = nullptr;
  ASSERT_EQ(qopt_context_create(QOPT_BACKEND_CUDA, 0, &ctx), QOPT_SUCCESS) << qopt_last_error();
  qopt_registry *registry = nullptr;
  ASSERT_EQ(qopt_registry_create(&registry), QOPT_SUCCESS);
  ASSERT_EQ(qopt_registry_add_shipped(registry, nullptr), QOPT_SUCCESS) << qopt_last_error();
  size_t count = 0;
  ASSERT_EQ(qopt_registry_count(registry, &count), QOPT_SUCCESS);
  for (size_t i = 0; i < count; ++i) {
    const char *name = nullptr;
    ASSERT_EQ(qopt_registry_kernel_name(registry, i, &name), QOPT_SUCCESS);
    qopt_kernel *kernel = nullptr;
    ASSERT_EQ(qopt_kernel_create(ctx, registry, name, &kernel), QOPT_SUCCESS)
        << name << ": " << qopt_last_error();
    qopt_kernel_info info{};
    ASSERT_EQ(qopt_kernel_get_info(kernel, &info), QOPT_SUCCESS);
    EXPECT_STREQ(info.origin, "<memory>") << name;
    qopt_kernel_destroy(kernel);
  }
  qopt_registry_destroy(registry);
  qopt_context_destroy(ctx);
}

} // namespace
