"""Code generation backends: LLVM IR for the host CPU (`cpu`) and the math library its kernels inline."""
