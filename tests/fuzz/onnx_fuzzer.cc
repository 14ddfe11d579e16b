// ONNX graphs brought as a model ("model": {"onnx": PATH}; ImportOnnx): any
// bytes import or are refused with a message starting "model.onnx", never
// a crash or an escaping exception (libonnx's checker and shape inference
// throw). A graph that imports builds as a model (Graph::Build): its layers
// are valid registry layers over the input shape it reports, and every
// parameter the layers create has an initial value of its shape among the
// graph's initializers, under the same name. A graph of several inputs is
// imported as a job would name them (model.input listing them all).
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "core/model/graph.h"
#include "core/onnx/onnx_import.h"
#include "onnx/onnx_pb.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep;
  const std::string path = fuzz::WriteScratch("model.onnx", data, size);
  absl::StatusOr<OnnxImport> imported = ImportOnnx(path, "", "");
  fuzz::CheckRefusal(imported.status());
  std::vector<std::string> named;
  if (!imported.ok() &&
      absl::StrContains(imported.status().message(), "list those the data")) {
    onnx::ModelProto m;
    FUZZ_CHECK(m.ParseFromArray(data, static_cast<int>(size)));
    std::set<std::string> inits;
    for (const auto& t : m.graph().initializer()) inits.insert(t.name());
    for (const auto& v : m.graph().input()) {
      if (!inits.count(v.name())) named.push_back(v.name());
    }
    imported = ImportOnnx(path, "", "", named);
    fuzz::CheckRefusal(imported.status());
  }
  if (!imported.ok()) {
    FUZZ_CHECK(absl::StartsWith(imported.status().message(), "model.onnx"));
    return 0;
  }
  FUZZ_CHECK(!imported->model.layers.empty());
  FUZZ_CHECK(imported->model.inputs.size() ==
             std::max<size_t>(1, named.size()));
  FUZZ_CHECK(imported->model.param_names == ParamNaming::kTorch);
  std::map<std::string, const Tensor*> initial;
  for (const auto& [name, t] : imported->initial) {
    FUZZ_CHECK(initial.emplace(name, &t).second);  // each name once
  }
  absl::StatusOr<std::unique_ptr<Graph>> g = Graph::Build(imported->model, 1);
  fuzz::CheckRefusal(g.status());
  if (!g.ok()) {  // what the import let through, for the report
    std::fprintf(stderr, "Graph::Build refused an imported model: %s\n",
                 std::string(g.status().message()).c_str());
  }
  FUZZ_CHECK(g.ok());
  FUZZ_CHECK((*g)->params().size() == initial.size());
  for (const Param* p : (*g)->params()) {
    auto it = initial.find(p->name);
    FUZZ_CHECK(it != initial.end());
    FUZZ_CHECK(it->second->shape() == p->value.shape());
  }
  return 0;
}
