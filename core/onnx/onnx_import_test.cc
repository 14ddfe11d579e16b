#include "core/onnx/onnx_import.h"

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"

namespace lockstep {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A small graph as torch.onnx.export writes one: x [batch, 1, 4, 4] ->
// Conv (2 filters 3x3, pads 1) -> Relu -> Flatten -> Gemm (3 units) ->
// logits, parameters under their state-dict names.
class Builder {
 public:
  Builder() {
    m_.set_ir_version(8);
    auto* o = m_.add_opset_import();
    o->set_domain("");
    o->set_version(17);
    g_ = m_.mutable_graph();
    g_->set_name("g");
    auto* x = g_->add_input();
    x->set_name("x");
    auto* t = x->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_param("batch");
    for (int d : {1, 4, 4}) t->mutable_shape()->add_dim()->set_dim_value(d);
  }
  void Init(const std::string& name, std::vector<int64_t> dims) {
    auto* i = g_->add_initializer();
    i->set_name(name);
    i->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) {
      i->add_dims(d);
      n *= d;
    }
    for (int64_t k = 0; k < n; ++k) i->add_float_data(0.01f * k);
  }
  onnx::NodeProto* Node(const std::string& op, std::vector<std::string> in,
                        std::vector<std::string> out) {
    auto* n = g_->add_node();
    n->set_op_type(op);
    n->set_name("/" + op + "_" + std::to_string(g_->node_size()));
    for (auto& s : in) n->add_input(s);
    for (auto& s : out) n->add_output(s);
    return n;
  }
  static void Ints(onnx::NodeProto* n, const std::string& name,
                   std::vector<int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void Int(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  // A Constant node of int64 values (shape [values] or a scalar).
  void Ints64(const std::string& out, std::vector<int64_t> v,
              bool scalar = false) {
    auto* n = Node("Constant", {}, {out});
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    auto* t = a->mutable_t();
    t->set_data_type(onnx::TensorProto::INT64);
    if (!scalar) t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
  }
  // torch's x.view(x.size(0), k * -1...): Shape -> Gather(0) -> [times
  // `batch_times`] -> Unsqueeze -> Concat with [-1] -> Reshape of `in`.
  void ViewBatchByRest(const std::string& in, const std::string& out,
                       int64_t batch_times) {
    Node("Shape", {in}, {"shape"});
    Ints64("zero", {0}, true);
    Builder::Int(Node("Gather", {"shape", "zero"}, {"batch"}), "axis", 0);
    std::string b = "batch";
    if (batch_times != 1) {
      Ints64("times", {batch_times}, true);
      Node("Mul", {"batch", "times"}, {"batch2"});
      b = "batch2";
    }
    Ints64("axes", {0});
    Node("Unsqueeze", {b, "axes"}, {"batch1"});
    Ints64("rest", {-1});
    Builder::Int(Node("Concat", {"batch1", "rest"}, {"target"}), "axis", 0);
    Node("Reshape", {in, "target"}, {out});
  }
  void Output(const std::string& name) {
    auto* o = g_->add_output();
    o->set_name(name);
    auto* t = o->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_param("batch");
    t->mutable_shape()->add_dim()->set_dim_value(3);
  }
  // The small CNN, its flattened features f unsqueezed at `axes`,
  // expanded to `shape`, summed over `sum_axes` and added to the logits:
  // the graph's output "out".
  void ExpandAndSum(std::vector<int64_t> axes, std::vector<int64_t> shape,
                    std::vector<int64_t> sum_axes) {
    Cnn();
    Ints64("uax", std::move(axes));
    Node("Unsqueeze", {"f", "uax"}, {"fu"});
    Ints64("e", std::move(shape));
    Node("Expand", {"fu", "e"}, {"x2"});
    Ints64("ax", std::move(sum_axes));
    Int(Node("ReduceSum", {"x2", "ax"}, {"x3"}), "keepdims", 0);
    Ints64("one", {1});
    Node("Unsqueeze", {"x3", "one"}, {"x4"});
    Node("Add", {"logits", "x4"}, {"out"});
    g_->mutable_output(0)->set_name("out");
  }
  // The small CNN.
  void Cnn(const std::string& weight = "conv.weight",
           std::vector<int64_t> pads = {1, 1, 1, 1}) {
    Init(weight, {2, 1, 3, 3});
    Init("conv.bias", {2});
    Init("fc.weight", {3, 32});
    Init("fc.bias", {3});
    auto* conv = Node("Conv", {"x", weight, "conv.bias"}, {"c"});
    Ints(conv, "pads", pads);
    Ints(conv, "kernel_shape", {3, 3});
    Node("Relu", {"c"}, {"r"});
    Node("Flatten", {"r"}, {"f"});
    auto* gemm = Node("Gemm", {"f", "fc.weight", "fc.bias"}, {"logits"});
    Int(gemm, "transB", 1);
    Output("logits");
  }
  std::string Write(const std::string& name) {
    const std::string path = JoinPath(::testing::TempDir(), name + ".onnx");
    std::string bytes;
    m_.SerializeToString(&bytes);
    EXPECT_TRUE(WriteFileAtomic(path, bytes).ok());
    return path;
  }
  onnx::ModelProto m_;
  onnx::GraphProto* g_;
};

// x.view(x.size(0), -1) after a conv: the shape sub-graph folds at import
// (the batch size read by Shape stays the batch's axis) and the reshape of
// the feature map is a flatten in torch's order.
TEST(OnnxImportTest, AShapeSubGraphFoldsIntoAFlatten) {
  Builder b;
  b.Init("conv.weight", {2, 1, 3, 3});
  b.Init("fc.weight", {3, 32});
  auto* conv = b.Node("Conv", {"x", "conv.weight"}, {"c"});
  Builder::Ints(conv, "pads", {1, 1, 1, 1});
  Builder::Ints(conv, "kernel_shape", {3, 3});
  b.ViewBatchByRest("c", "f", 1);
  Builder::Int(b.Node("Gemm", {"f", "fc.weight"}, {"logits"}), "transB", 1);
  b.Output("logits");
  absl::StatusOr<OnnxImport> imp = ImportOnnx(b.Write("view"), "", "");
  ASSERT_TRUE(imp.ok()) << imp.status();
  std::vector<std::string> types;
  for (const LayerSpec& l : imp->model.layers) types.push_back(l.type);
  EXPECT_THAT(types, ElementsAre("conv2d", "flatten", "dense"));
}

// A reshape whose shape computes with the batch size (x.view(2 * n, -1))
// cannot be made static: refused, naming the node.
TEST(OnnxImportTest, AShapeThatComputesWithTheBatchSizeIsRefused) {
  Builder b;
  b.Init("fc.weight", {3, 8});
  b.ViewBatchByRest("x", "f", 2);
  Builder::Int(b.Node("Gemm", {"f", "fc.weight"}, {"logits"}), "transB", 1);
  b.Output("logits");
  absl::StatusOr<OnnxImport> imp = ImportOnnx(b.Write("batch2"), "", "");
  ASSERT_FALSE(imp.ok());
  EXPECT_THAT(imp.status().message(),
              HasSubstr("Mul computes with the batch size; a shape that "
                        "cannot be made static is not imported"));
  EXPECT_THAT(std::string(imp.status().message()),
              StartsWith("model.onnx: node \"/Mul_"));
}

TEST(OnnxImportTest, ATorchCnnBecomesLayersUnderItsStateDictNames) {
  Builder b;
  b.Cnn();
  absl::StatusOr<OnnxImport> imp = ImportOnnx(b.Write("cnn"), "", "");
  ASSERT_TRUE(imp.ok()) << imp.status();
  EXPECT_EQ(imp->nodes, 4);
  ASSERT_EQ(imp->model.inputs.size(), 1u);
  EXPECT_EQ(imp->model.inputs[0].name, "input");
  EXPECT_EQ(imp->model.inputs[0].shape, (Shape{4, 4, 1}));  // channels-last
  EXPECT_EQ(imp->model.param_names, ParamNaming::kTorch);
  std::vector<std::string> layers;
  for (const LayerSpec& l : imp->model.layers) {
    layers.push_back(l.type + " " + l.name);
  }
  EXPECT_THAT(layers,
              ElementsAre("conv2d conv", "flatten Flatten_3", "dense fc"));
  // The ReLU went into the convolution; padding 1 on each side.
  EXPECT_THAT(imp->model.layers[0].config,
              HasSubstr("\"activation\":\"relu\""));
  EXPECT_THAT(imp->model.layers[0].config, HasSubstr("\"padding\":[1,1]"));
  std::vector<std::string> names;
  for (const auto& [name, t] : imp->initial) {
    names.push_back(name + " " + ShapeToString(t.shape()));
  }
  EXPECT_THAT(names, ElementsAre("conv.weight [2, 1, 3, 3]", "conv.bias [2]",
                                 "fc.weight [3, 32]", "fc.bias [3]"));
  EXPECT_FLOAT_EQ(imp->initial[2].second.values()[5], 0.05f);
}

struct Refusal {
  std::string what;
  std::function<void(Builder&)> build;
  std::string input, output;
  std::string message;
};

TEST(OnnxImportTest, WhatItCannotTrainIsRefusedNamingNodeOpAndWhatToDo) {
  const std::vector<Refusal> cases = {
      {"an unsupported op",
       [](Builder& b) {
         b.Cnn();
         b.Node("Det", {"logits"}, {"e"});
       },
       "", "logits",
       "node \"/Det_5\" (Det): op Det is not supported yet; "
       "supported: Abs, Add, AveragePool, BatchNormalization"},
      {"a Trilu of a feature map",
       [](Builder& b) {
         b.Cnn();
         b.Node("Trilu", {"r"}, {"t"});
       },
       "", "logits",
       "node \"/Trilu_5\" (Trilu): a Trilu of a batch is imported on "
       "matrices (2 axes or more a sample, not a feature map)"},
      {"a weight without a state-dict name",
       [](Builder& b) { b.Cnn("onnx::Conv_7"); }, "", "",
       "node \"/Conv_1\" (Conv): its parameter \"onnx::Conv_7\" is not "
       "named like a torch parameter (PREFIX.weight); export with "
       "lockstep.export"},
      {"asymmetric pads",
       [](Builder& b) {
         b.Cnn("conv.weight", {0, 0, 1, 1});
       },
       "", "",
       "node \"/Conv_1\" (Conv): pads [0, 0, 1, 1] are not the same "
       "on both sides"},
      // libonnx's shape inference divides by these unchecked (the fuzz
      // target found a stride of 0): refused before it runs.
      {"a stride of 0",
       [](Builder& b) {
         b.Cnn();
         Builder::Ints(b.g_->mutable_node(0), "strides", {0, 1});
       },
       "", "",
       "node \"/Conv_1\" (Conv): strides holds 0 (it must be 1 to "
       "1048576)"},
      {"a dilation past 2^20",
       [](Builder& b) {
         b.Cnn();
         Builder::Ints(b.g_->mutable_node(0), "dilations",
                       {int64_t{1} << 62, 1});
       },
       "", "",
       "node \"/Conv_1\" (Conv): dilations holds 4611686018427387904 (it "
       "must be 1 to 1048576)"},
      {"a 1-D convolution (Conv1d)",
       [](Builder& b) {
         b.Cnn();
         Builder::Ints(b.g_->mutable_node(0), "dilations", {1});
       },
       "", "",
       "node \"/Conv_1\" (Conv): a 1-D Conv (its dilations has 1 values); "
       "only 2-D convolutions and pools are imported (Conv2d, MaxPool2d, "
       "AvgPool2d: a 1-D one can be exported as 2-D with a height of 1)"},
      {"a float64 parameter",
       [](Builder& b) {
         b.Cnn();
         onnx::TensorProto* w = b.g_->mutable_initializer(0);
         w->set_data_type(onnx::TensorProto::DOUBLE);
         for (float v : w->float_data()) w->add_double_data(v);
         w->clear_float_data();
       },
       "", "",
       "node \"/Conv_1\" (Conv): parameter \"conv.weight\" is not float32 (it "
       "is DOUBLE); export the model in float32"},
      {"a Linear applied twice",
       [](Builder& b) {
         b.Init("in.weight", {3, 16});
         b.Init("fc.weight", {3, 3});
         b.Node("Flatten", {"x"}, {"f"});
         Builder::Int(b.Node("Gemm", {"f", "in.weight"}, {"h0"}), "transB", 1);
         Builder::Int(b.Node("Gemm", {"h0", "fc.weight"}, {"h"}), "transB", 1);
         Builder::Int(b.Node("Gemm", {"h", "fc.weight"}, {"out"}), "transB", 1);
         b.Output("out");
       },
       "", "",
       "node \"/Gemm_4\" (Gemm): parameter \"fc.weight\" is used by two "
       "nodes: a module applied twice (one Linear or Conv on two inputs) is "
       "not imported; weights are shared only between an embedding and its "
       "output Linear, and by element-wise ops"},
      {"a group of 0",
       [](Builder& b) {
         b.Cnn();
         Builder::Int(b.g_->mutable_node(0), "group", 0);
       },
       "", "", "node \"/Conv_1\" (Conv): group 0 (it must be 1 to 1048576)"},
      // The fuzz target found an imported perm that repeats an axis
      // (which Graph::Build then refused).
      {"a perm that repeats an axis",
       [](Builder& b) {
         b.Cnn();
         b.Ints64("last", {2});
         b.Node("Unsqueeze", {"f", "last"}, {"u"});
         Builder::Ints(b.Node("Transpose", {"u"}, {"t"}), "perm", {0, 2, 2});
       },
       "", "logits",
       "node \"/Transpose_7\" (Transpose): perm [0, 2, 2] is no "
       "permutation of the 3 axes of its input"},
      // The fuzz target found a shape that folds to inf (an integer
      // division by 0), cast to int64 unchecked.
      {"a shape that folds to inf",
       [](Builder& b) {
         b.Cnn();
         b.Ints64("s", {1, 32});
         b.Ints64("z", {0});
         b.Node("Div", {"s", "z"}, {"q"});
         b.Node("Reshape", {"f", "q"}, {"rq"});
       },
       "", "logits",
       "(Reshape): input 1 (\"q\") must hold integers; it holds inf"},
      // Two constants each within bounds whose broadcast is not: 2^32
      // values (the fold threw std::bad_alloc before).
      {"a broadcast of two large constants",
       [](Builder& b) {
         b.Cnn();
         b.Ints64("s1", {65536, 1});
         b.Ints64("s2", {1, 65536});
         b.Node("ConstantOfShape", {"s1"}, {"c1"});
         b.Node("ConstantOfShape", {"s2"}, {"c2"});
         b.Node("Add", {"c1", "c2"}, {"big"});
         b.Node("Shape", {"big"}, {"bs"});
         b.Node("Reshape", {"f", "bs"}, {"rq"});
       },
       "", "logits",
       "(Add): Add of [65536, 1] and [1, 65536] holds over 16777216 "
       "values"},
      // A constant's sizes whose product matches its values although each
      // is negative (folded as a [-1, -2] tensor before).
      {"a constant of negative sizes",
       [](Builder& b) {
         b.Cnn();
         auto* n = b.Node("Constant", {}, {"neg"});
         auto* a = n->add_attribute();
         a->set_name("value");
         a->set_type(onnx::AttributeProto::TENSOR);
         auto* t = a->mutable_t();
         t->set_name("neg");
         t->set_data_type(onnx::TensorProto::INT64);
         t->add_dims(-1);
         t->add_dims(-2);
         t->add_int64_data(1);
         t->add_int64_data(32);
         b.Node("Reshape", {"f", "neg"}, {"rq"});
       },
       "", "logits", "tensor \"neg\" has a size of -1"},
      // An Expand's folded shape is the output's per-sample shape: a
      // negative size (Graph::Build aborted on it) and one whose values
      // overflow int64 are refused at the node.
      {"an Expand to a negative size",
       [](Builder& b) {
         b.ExpandAndSum({1}, {1, -7, 32}, {1, 2});
       },
       "", "out",
       "node \"/Expand_8\" (Expand): its output \"x2\", [-7, 32] per sample, "
       "has a size of -7"},
      {"an Expand past 2^31 values per sample",
       [](Builder& b) {
         b.ExpandAndSum({1, 2}, {1, int64_t{1} << 40, int64_t{1} << 40, 32},
                        {1, 2, 3});
       },
       "", "out",
       "(Expand): its output \"x2\", [1099511627776, 1099511627776, 32] per "
       "sample, holds over 2147483648 values"},
      {"an input past 2^31 values per sample",
       [](Builder& b) {
         b.Cnn();
         auto* shape = b.g_->mutable_input(0)
                           ->mutable_type()
                           ->mutable_tensor_type()
                           ->mutable_shape();
         shape->mutable_dim(2)->set_dim_value(int64_t{1} << 40);
         shape->mutable_dim(3)->set_dim_value(int64_t{1} << 40);
       },
       "", "logits",
       "tensor \"x\", [1, 1099511627776, 1099511627776] per sample, holds "
       "over 2147483648 values"},
      // Split sizes that sum to the axis but slice outside it (one
      // negative).
      {"a split with a negative size",
       [](Builder& b) {
         b.Cnn();
         b.Ints64("sizes", {35, -3});
         Builder::Int(b.Node("Split", {"f", "sizes"}, {"s1", "s2"}), "axis", 1);
       },
       "", "logits",
       "(Split): sizes 35, -3 do not split 32 into its 2 outputs"},
      // An AvgPool2d(padding=N)'s Pad whose pads would overflow the pool's
      // output size.
      {"a Pad past 2^20",
       [](Builder& b) {
         b.Cnn();
         const int64_t p = int64_t{1} << 40;
         b.Ints64("pads", {0, 0, p, p, 0, 0, p, p});
         b.Node("Pad", {"r", "pads"}, {"padded"});
         Builder::Ints(b.Node("AveragePool", {"padded"}, {"pooled"}),
                       "kernel_shape", {1, 1});
       },
       "", "logits",
       "(Pad): pads 1099511627776 and 1099511627776 (pads are 0 to "
       "1048576)"},
      // ONNX's Squeeze names axes of size 1 (an axis past the input's was
      // ignored before).
      {"a squeeze past the input's axes",
       [](Builder& b) {
         b.Cnn();
         b.Ints64("sax", {int64_t{1} << 40});
         b.Node("Squeeze", {"f", "sax"}, {"sq"});
       },
       "", "logits",
       "(Squeeze): squeezes axis 1099511627776 of an input of 2 axes"},
      {"a squeeze of a negative axis past the input's",
       [](Builder& b) {
         b.Cnn();
         b.Ints64("sax", {-5});
         b.Node("Squeeze", {"f", "sax"}, {"sq"});
       },
       "", "logits", "(Squeeze): squeezes axis -5 of an input of 2 axes"},
      {"a squeeze of an axis of 32",
       [](Builder& b) {
         b.Cnn();
         b.Ints64("sax", {1});
         b.Node("Squeeze", {"f", "sax"}, {"sq"});
       },
       "", "logits", "(Squeeze): squeezes axis 1, of size 32 (not 1)"},
      {"a gather past its axis",
       [](Builder& b) {
         b.Cnn();
         b.Ints64("gi", {int64_t{1} << 40}, true);
         Builder::Int(b.Node("Gather", {"f", "gi"}, {"g1"}), "axis", 1);
       },
       "", "logits", "(Gather): index 1099511627776 is outside axis 1's 32"},
      {"a Trilu past 2^24 values",
       [](Builder& b) {
         b.Cnn();
         b.Ints64("uax", {2, 3});
         b.Node("Unsqueeze", {"f", "uax"}, {"fu"});
         b.Ints64("e", {1, 32, 8192, 4096});
         b.Node("Expand", {"fu", "e"}, {"x2"});
         b.Node("Trilu", {"x2"}, {"tr"});
       },
       "", "logits",
       "(Trilu): a Trilu of 8192 x 4096 matrices (its mask holds at most "
       "2^24 values)"},
      {"an op of another domain",
       [](Builder& b) {
         b.Cnn();
         b.Node("Relu", {"logits"}, {"e"})->set_domain("com.microsoft");
       },
       "", "logits", "(Relu): op com.microsoft.Relu is not supported yet"},
      {"an output the graph lacks", [](Builder& b) { b.Cnn(); }, "", "probs",
       "model.output \"probs\" is not an output of the graph; its outputs: "
       "logits"},
      {"an input the graph lacks", [](Builder& b) { b.Cnn(); }, "images", "",
       "model.input \"images\" is not an input of the graph; its inputs: x"},
      {"an old opset",
       [](Builder& b) {
         b.Cnn();
         b.m_.mutable_opset_import(0)->set_version(12);
       },
       "", "",
       "uses opset 12 of the default domain; opsets 13 to 17 are "
       "read"},
      {"control flow",
       [](Builder& b) {
         b.Cnn();
         auto* n = b.Node("If", {"logits"}, {"z"});
         auto* a = n->add_attribute();
         a->set_name("then_branch");
         a->set_type(onnx::AttributeProto::GRAPH);
         a->mutable_g()->set_name("then");
       },
       "", "logits",
       "(If): a subgraph (control flow) cannot be trained "
       "here"},
  };
  for (const Refusal& c : cases) {
    Builder b;
    c.build(b);
    absl::StatusOr<OnnxImport> imp =
        ImportOnnx(b.Write("refused"), c.input, c.output);
    EXPECT_EQ(imp.status().code(), absl::StatusCode::kInvalidArgument)
        << c.what << ": " << imp.status();
    EXPECT_THAT(std::string(imp.status().message()), HasSubstr(c.message))
        << c.what;
    EXPECT_THAT(std::string(imp.status().message()), StartsWith("model.onnx: "))
        << c.what;
  }
}

TEST(OnnxImportTest, AFileThatIsNotAModelIsRefused) {
  const std::string dir = ::testing::TempDir();
  ASSERT_TRUE(WriteFileAtomic(JoinPath(dir, "text.onnx"), "hello").ok());
  absl::StatusOr<OnnxImport> text =
      ImportOnnx(JoinPath(dir, "text.onnx"), "", "");
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(text.status().message()),
              HasSubstr("is not an ONNX model (5 bytes"));

  Builder b;
  b.Cnn();
  absl::StatusOr<std::string> whole = ReadFile(b.Write("whole"));
  ASSERT_TRUE(whole.ok());
  ASSERT_TRUE(WriteFileAtomic(JoinPath(dir, "cut.onnx"),
                              whole->substr(0, whole->size() / 2))
                  .ok());
  absl::StatusOr<OnnxImport> cut =
      ImportOnnx(JoinPath(dir, "cut.onnx"), "", "");
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(cut.status().message()), StartsWith("model.onnx: "));

  absl::StatusOr<OnnxImport> missing =
      ImportOnnx(JoinPath(dir, "nowhere.onnx"), "", "");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("cannot read \"" + JoinPath(dir, "nowhere.onnx")));
}

}  // namespace
}  // namespace lockstep
