"""C++ code generation with the system protoc (Bazel may download nothing).

lockstep_cc_proto(name = "foo_cc_proto", srcs = ["foo.proto"]) runs
/usr/bin/protoc over proto/foo.proto and wraps proto/foo.pb.{h,cc} in a
cc_library; code includes "proto/foo.pb.h". With grpc = True it also runs the
gRPC plugin (proto/foo.grpc.pb.{h,cc}) and links gRPC. Imports are rooted at
the workspace (`import "proto/bar.proto";`): list the imported files in
`proto_deps` and their cc_proto targets in `deps`.
"""

load("@rules_cc//cc:defs.bzl", "cc_library")

def lockstep_cc_proto(name, srcs, deps = [], proto_deps = [], grpc = False, visibility = None):
    outs = []
    for src in srcs:
        if not src.endswith(".proto"):
            fail("lockstep_cc_proto: %s is not a .proto file" % src)
        base = src[:-len(".proto")]
        outs += [base + ".pb.h", base + ".pb.cc"]
        if grpc:
            outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    cmd = "/usr/bin/protoc -I. --cpp_out=$(GENDIR)"
    if grpc:
        cmd += (" --grpc_out=$(GENDIR)" +
                " --plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin")
    cmd += " " + " ".join(["$(location %s)" % s for s in srcs])
    native.genrule(
        name = name + "_gen",
        srcs = srcs + proto_deps,
        outs = outs,
        cmd = cmd,
        visibility = ["//visibility:private"],
    )
    cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + ["//third_party:protobuf"] + (["//third_party:grpc"] if grpc else []),
        visibility = visibility,
    )
