// The object that carries the LibTorch tests' precompiled <torch/torch.h>
// (tests/CMakeLists.txt: mona_test_torch_pch); nothing of its own.
