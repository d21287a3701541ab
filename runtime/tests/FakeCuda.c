/* FakeCuda.c - a stand-in libcuda that only has cuInit (see FakeDriverTest). */
__attribute__((visibility("default"))) int cuInit(unsigned flags) {
  (void)flags;
  return 0;
}
