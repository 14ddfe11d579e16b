"""CUDA build rules for Bazel 4.2.3 without rules_cuda (offline).

Libraries made here (and any target given `target_compatible_with =
cuda_only()`) build only under --config=cuda (.bazelrc, which sets
//third_party:cuda_enabled). Without it they are incompatible: `bazel build
//...` skips them, and their @local_cuda dependencies are never fetched, so a
machine without the toolkit builds everything else. Tests made by
cuda_cc_test build a stub that skips instead (see there).
"""

load("@rules_cc//cc:defs.bzl", "cc_library", "cc_test")

NVCC = "/usr/local/cuda/bin/nvcc"

# sm_90 machine code for H100/H200 plus compute_90 PTX that newer GPUs JIT.
NVCC_FLAGS = [
    "-std=c++17",
    "-O2",
    "-Xcompiler",
    "-fPIC",
    "-gencode",
    "arch=compute_90,code=sm_90",
    "-gencode",
    "arch=compute_90,code=compute_90",
]

def cuda_only():
    """target_compatible_with value: compatible only under --config=cuda."""
    return select({
        "//third_party:cuda_enabled": [],
        "//conditions:default": ["@platforms//:incompatible"],
    })

def if_cuda(if_true, if_false = []):
    """if_true under --config=cuda, else if_false."""
    return select({
        "//third_party:cuda_enabled": if_true,
        "//conditions:default": if_false,
    })

def cuda_library(name, srcs, hdrs = [], deps = [], nvcc_hdrs = [], nvcc_flags = [], visibility = None, testonly = False):
    """A cc_library over .cu files compiled by nvcc, one genrule per file.

    Args:
      name: the cc_library's name.
      srcs: .cu files. They may include `hdrs`, `nvcc_hdrs` (rooted at the
        workspace) and CUDA headers: nvcc sees no other Bazel dependency.
      hdrs: the library's headers (plain C++, usable from .cc files).
      deps: cc_library dependencies of the wrapping library.
      nvcc_hdrs: other packages' header files the .cu files include (their
        cc_library belongs in deps too).
      nvcc_flags: extra nvcc flags (e.g. "--fmad=false" where results must
        match the CPU kernels bit for bit).
      visibility: as usual.
      testonly: as usual.
    """
    objs = []
    for src in srcs:
        if not src.endswith(".cu"):
            fail("cuda_library %s: %s is not a .cu file" % (name, src))
        obj = "_cuda_o/%s/%s.o" % (name, src[:-len(".cu")])
        native.genrule(
            name = "%s_%s_nvcc" % (name, src[:-len(".cu")].replace("/", "_")),
            srcs = [src] + hdrs + nvcc_hdrs,
            outs = [obj],
            cmd = " ".join([NVCC] + NVCC_FLAGS + nvcc_flags + [
                "-I.",
                "-I$(GENDIR)",
                "-c",
                "$(location %s)" % src,
                "-o",
                "$@",
            ]),
            message = "nvcc %s" % src,
            target_compatible_with = cuda_only(),
            testonly = testonly,
            visibility = ["//visibility:private"],
        )
        objs.append(obj)
    cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + if_cuda(["@local_cuda//:cudart"]),
        linkstatic = True,
        target_compatible_with = cuda_only(),
        testonly = testonly,
        visibility = visibility,
    )

def cuda_cc_library(name, deps = [], **kwargs):
    """A cc_library of host C++ that uses the CUDA headers and libraries."""
    cc_library(
        name = name,
        deps = deps + if_cuda(["@local_cuda//:cudart"]),
        target_compatible_with = cuda_only(),
        **kwargs
    )

def cuda_cc_test(name, srcs, deps = [], **kwargs):
    """A cc_test that needs the CUDA toolkit.

    Without --config=cuda it builds third_party/cuda_disabled_test.cc instead
    (one test that skips, saying why), so `bazel test //...` reports the
    target as skipped cases rather than as a target without a test report.
    """
    cc_test(
        name = name,
        srcs = if_cuda(srcs, ["//third_party:cuda_disabled_test.cc"]),
        deps = if_cuda(deps + ["@local_cuda//:cudart"], ["//third_party:gtest_main"]),
        **kwargs
    )
