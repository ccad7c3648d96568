// The object that carries a precompiled header of the tests (tests/CMakeLists.txt:
// mona_test_torch_pch, <torch/torch.h>; mona_test_gtest_pch, <gtest/gtest.h>); nothing of its
// own.
