// Compiles to nothing: the target mona_torch_pch (CMakeLists.txt) exists to own the
// precompiled LibTorch header that the torch-using executables reuse.
