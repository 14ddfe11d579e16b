"""lockstep_fuzzer: one libFuzzer target and its bounded test.

lockstep_fuzzer(name, srcs, deps) makes
  - cc_binary `name`: under --config=fuzz (clang, ASan + UBSan) a libFuzzer
    binary; otherwise the same LLVMFuzzerTestOneInput linked with
    replay_main.cc, which runs every input of the corpus, each prefix of
    it and a fixed set of byte changes (no coverage guidance: a regression
    check any compiler and sanitizer config can run);
  - sh_test `name_test`: run_fuzzer.sh over corpus/<name>/ (libFuzzer:
    LOCKSTEP_FUZZ_SECONDS seconds, default 6, on a writable copy; replay:
    the whole corpus once).
"""

load("@rules_cc//cc:defs.bzl", "cc_binary")

def lockstep_fuzzer(name, srcs, deps = [], size = "small"):
    cc_binary(
        name = name,
        testonly = True,
        srcs = srcs,
        deps = deps + [":fuzz_util"] + select({
            ":fuzz_enabled": [],
            "//conditions:default": [":replay_main"],
        }),
        linkopts = select({
            ":fuzz_enabled": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
    )
    native.sh_test(
        name = name + "_test",
        size = size,
        srcs = ["run_fuzzer.sh"],
        args = [
            "$(location :%s)" % name,
            "tests/fuzz/corpus/%s" % name,
        ],
        data = [":" + name] + native.glob(["corpus/%s/**" % name]),
        env = {"LOCKSTEP_FUZZ_TARGET": name},
    )
