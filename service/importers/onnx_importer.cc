#include "service/importers/onnx_importer.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "onnx/defs/schema.h"
#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"
#include "service/importers/import_util.h"
#include "service/importers/roofline.h"

namespace placement::importers {
namespace {

// Element size in bytes of an onnx::TensorProto_DataType; 4 when unknown (fp32 is the common case).
int64_t ElementBytes(int32_t type) {
  switch (type) {
    case onnx::TensorProto_DataType_DOUBLE:
    case onnx::TensorProto_DataType_INT64:
    case onnx::TensorProto_DataType_UINT64:
    case onnx::TensorProto_DataType_COMPLEX64:
      return 8;
    case onnx::TensorProto_DataType_COMPLEX128:
      return 16;
    case onnx::TensorProto_DataType_FLOAT16:
    case onnx::TensorProto_DataType_BFLOAT16:
    case onnx::TensorProto_DataType_INT16:
    case onnx::TensorProto_DataType_UINT16:
      return 2;
    case onnx::TensorProto_DataType_INT8:
    case onnx::TensorProto_DataType_UINT8:
    case onnx::TensorProto_DataType_BOOL:
      return 1;
    default:
      return 4;
  }
}

bool IsFloating(int32_t type) {
  return type == onnx::TensorProto_DataType_FLOAT || type == onnx::TensorProto_DataType_DOUBLE ||
         type == onnx::TensorProto_DataType_FLOAT16 || type == onnx::TensorProto_DataType_BFLOAT16;
}

// A tensor above 1 PiB is absurd (ModelLimits::max_bytes): its size is capped there, so a hostile shape
// (dims of 10^7 x 10^7 x 10^7) becomes a request that validation rejects by name instead of a
// float-to-int64 overflow (UB, found by the importer_onnx fuzzer). Sums of tensor sizes (a node's
// outputs, an edge's inputs, a layer's parameters) are capped at kMaxSummedBytes, far above any valid
// value and far enough below INT64_MAX that the training expansion's multiples cannot overflow.
constexpr int64_t kMaxTensorBytes = int64_t{1} << 50;
constexpr int64_t kMaxSummedBytes = int64_t{1} << 56;

void AddBytes(int64_t& total, int64_t bytes) { total = std::min(total + bytes, kMaxSummedBytes); }

struct TensorInfo {
  std::vector<int64_t> dims;  // -1 = unknown
  int64_t element_bytes = 4;
  bool known = false;  // has a rank

  double Elements() const {
    double n = 1;
    for (int64_t d : dims) n *= d > 0 ? static_cast<double>(d) : 1.0;
    return n;
  }
  int64_t Bytes() const {
    if (!known) return 0;
    const double bytes = Elements() * static_cast<double>(element_bytes);
    return bytes >= static_cast<double>(kMaxTensorBytes) ? kMaxTensorBytes
                                                          : static_cast<int64_t>(bytes);
  }
  int64_t Dim(int i) const {
    if (i < 0) i += static_cast<int>(dims.size());
    return i >= 0 && i < static_cast<int>(dims.size()) && dims[i] > 0 ? dims[i] : 1;
  }
};

TensorInfo FromTypeProto(const onnx::TypeProto& type) {
  TensorInfo info;
  if (!type.has_tensor_type()) return info;
  info.element_bytes = ElementBytes(type.tensor_type().elem_type());
  if (!type.tensor_type().has_shape()) return info;
  info.known = true;
  for (const onnx::TensorShapeProto_Dimension& dim : type.tensor_type().shape().dim()) {
    info.dims.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
  }
  return info;
}

TensorInfo FromTensorProto(const onnx::TensorProto& tensor) {
  TensorInfo info;
  info.known = true;
  info.element_bytes = ElementBytes(tensor.data_type());
  info.dims.assign(tensor.dims().begin(), tensor.dims().end());
  return info;
}

// Values of a small int64 tensor (a shape), from int64_data or raw_data.
std::vector<int64_t> Int64Values(const onnx::TensorProto& tensor) {
  std::vector<int64_t> values(tensor.int64_data().begin(), tensor.int64_data().end());
  if (values.empty() && tensor.has_raw_data() &&
      tensor.data_type() == onnx::TensorProto_DataType_INT64) {
    const std::string& raw = tensor.raw_data();
    values.resize(raw.size() / sizeof(int64_t));
    std::memcpy(values.data(), raw.data(), values.size() * sizeof(int64_t));
  }
  return values;
}

const onnx::AttributeProto* FindAttribute(const onnx::NodeProto& node, absl::string_view name) {
  for (const onnx::AttributeProto& attribute : node.attribute()) {
    if (attribute.name() == name) return &attribute;
  }
  return nullptr;
}

int64_t IntAttribute(const onnx::NodeProto& node, absl::string_view name, int64_t fallback) {
  const onnx::AttributeProto* attribute = FindAttribute(node, name);
  return attribute != nullptr && attribute->has_i() ? attribute->i() : fallback;
}

bool IsView(const std::string& op) {
  return op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" ||
         op == "Identity" || op == "Shape";
}

bool IsMatrixOp(const std::string& op) {
  return op == "Conv" || op == "ConvTranspose" || op == "Gemm" || op == "MatMul";
}

// Estimated forward FLOPs of one node from its input / output shapes.
double NodeFlops(const onnx::NodeProto& node, const std::vector<const TensorInfo*>& inputs,
                 const std::vector<const TensorInfo*>& outputs) {
  const std::string& op = node.op_type();
  static const TensorInfo kUnknown;
  const TensorInfo& in0 = !inputs.empty() && inputs[0] != nullptr ? *inputs[0] : kUnknown;
  const TensorInfo& in1 = inputs.size() > 1 && inputs[1] != nullptr ? *inputs[1] : kUnknown;
  const TensorInfo& out0 = !outputs.empty() && outputs[0] != nullptr ? *outputs[0] : kUnknown;
  const double out_elements = out0.known ? out0.Elements() : in0.Elements();
  if (op == "Conv") {
    // weight [Cout, Cin/group, kh, kw]: every output element needs Cin/group * kh * kw MACs.
    double macs_per_output = 1;
    for (size_t i = 1; i < in1.dims.size(); ++i) macs_per_output *= in1.Dim(static_cast<int>(i));
    return 2.0 * out_elements * macs_per_output;
  }
  if (op == "ConvTranspose") {
    // weight [Cin, Cout/group, kh, kw]: every input element scatters Cout/group * kh * kw MACs.
    double macs_per_input = 1;
    for (size_t i = 1; i < in1.dims.size(); ++i) macs_per_input *= in1.Dim(static_cast<int>(i));
    return 2.0 * in0.Elements() * macs_per_input;
  }
  if (op == "Gemm") {
    const bool trans_a = IntAttribute(node, "transA", 0) != 0;
    const double k = static_cast<double>(trans_a ? in0.Dim(0) : in0.Dim(1));
    return 2.0 * out_elements * k;
  }
  if (op == "MatMul") {
    return 2.0 * out_elements * static_cast<double>(in0.Dim(-1));
  }
  if (op == "MaxPool" || op == "AveragePool" || op == "LpPool") {
    double window = 1;
    if (const onnx::AttributeProto* kernel = FindAttribute(node, "kernel_shape")) {
      for (int64_t k : kernel->ints()) window *= static_cast<double>(k);
    }
    return out_elements * window;
  }
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool" || op == "ReduceMean" ||
      op == "ReduceSum" || op == "ReduceMax") {
    return in0.Elements();
  }
  if (op == "BatchNormalization" || op == "InstanceNormalization" ||
      op == "LayerNormalization") {
    return 4.0 * out_elements;
  }
  if (op == "LRN") return 2.0 * static_cast<double>(IntAttribute(node, "size", 5)) * out_elements;
  if (op == "Softmax" || op == "LogSoftmax") return 5.0 * out_elements;
  if (op == "Sum" || op == "Max" || op == "Min" || op == "Mean") {
    return out_elements * static_cast<double>(std::max<int>(1, node.input_size() - 1));
  }
  if (op == "Concat" || op == "Split" || op == "Transpose" || op == "Gather" || op == "Slice" ||
      op == "Pad" || op == "Tile" || op == "Expand") {
    return 0;  // data movement only: the byte term of the roofline decides
  }
  return out_elements;
}

}  // namespace

absl::StatusOr<LayerGraph> OnnxLayerGraph(absl::string_view path, absl::string_view bytes,
                                          const ImportOptions& options) {
  onnx::ModelProto model;
  if (bytes.size() > static_cast<size_t>(INT32_MAX) ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a binary ONNX ModelProto (protobuf parse failed)"));
  }
  if (!model.has_graph() || model.graph().node_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ONNX model has no graph nodes"));
  }
  onnx::GraphProto* graph = model.mutable_graph();

  // Floating-point initializers are weights; integer ones are shapes and indices (e.g. Reshape targets).
  absl::flat_hash_set<std::string> initializer_names, weight_initializers;
  for (const onnx::TensorProto& tensor : graph->initializer()) {
    initializer_names.insert(tensor.name());
    if (IsFloating(tensor.data_type())) weight_initializers.insert(tensor.name());
  }

  // Graph inputs that are not initializers: data if any node reads them at input index 0, otherwise
  // (bias / weight slots only) parameters.
  absl::flat_hash_set<std::string> read_as_data;
  for (const onnx::NodeProto& node : graph->node()) {
    if (node.input_size() > 0) read_as_data.insert(node.input(0));
  }
  absl::flat_hash_set<std::string> data_inputs, parameter_inputs;
  for (onnx::ValueInfoProto& input : *graph->mutable_input()) {
    if (initializer_names.contains(input.name())) continue;
    if (read_as_data.contains(input.name())) {
      data_inputs.insert(input.name());
      if (options.onnx_batch_size > 0 && input.type().tensor_type().has_shape() &&
          input.type().tensor_type().shape().dim_size() > 0) {
        onnx::TensorShapeProto_Dimension* batch =
            input.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0);
        batch->set_dim_value(options.onnx_batch_size);
      }
    } else if (IsFloating(input.type().tensor_type().elem_type())) {
      parameter_inputs.insert(input.name());
    }
  }
  if (options.onnx_batch_size > 0) {
    // Inferred shapes stored in the file would conflict with the new batch size.
    graph->clear_value_info();
    for (onnx::ValueInfoProto& output : *graph->mutable_output()) {
      if (output.type().tensor_type().has_shape() &&
          output.type().tensor_type().shape().dim_size() > 0) {
        output.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->clear_dim_value();
      }
    }
  }

  try {
    onnx::ShapeInferenceOptions inference_options{/*check_type=*/false, /*error_mode=*/0,
                                                  /*enable_data_propagation=*/true};
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), inference_options);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ONNX shape inference failed: ", e.what()));
  }

  absl::flat_hash_map<std::string, TensorInfo> tensors;
  for (const onnx::ValueInfoProto& value : graph->input()) tensors[value.name()] = FromTypeProto(value.type());
  for (const onnx::ValueInfoProto& value : graph->value_info()) {
    tensors[value.name()] = FromTypeProto(value.type());
  }
  for (const onnx::ValueInfoProto& value : graph->output()) {
    TensorInfo info = FromTypeProto(value.type());
    if (info.known || !tensors.contains(value.name())) tensors[value.name()] = info;
  }
  absl::flat_hash_map<std::string, const onnx::TensorProto*> constant_values;
  for (const onnx::TensorProto& tensor : graph->initializer()) {
    tensors[tensor.name()] = FromTensorProto(tensor);
    constant_values[tensor.name()] = &tensor;
  }

  // Parameters: initializers, ConstantOfShape outputs, weight-slot graph inputs.
  absl::flat_hash_set<std::string> parameters = weight_initializers;
  parameters.insert(parameter_inputs.begin(), parameter_inputs.end());
  absl::flat_hash_set<std::string> constants;  // Constant outputs: neither ops nor parameters
  for (const onnx::NodeProto& node : graph->node()) {
    if (node.op_type() == "Constant") {
      for (const std::string& output : node.output()) constants.insert(output);
      if (const onnx::AttributeProto* value = FindAttribute(node, "value");
          value != nullptr && value->has_t() && node.output_size() > 0) {
        tensors[node.output(0)] = FromTensorProto(value->t());
        constant_values[node.output(0)] = &value->t();
      }
    } else if (node.op_type() == "ConstantOfShape" && node.output_size() > 0) {
      parameters.insert(node.output(0));
      TensorInfo& info = tensors[node.output(0)];
      if (!info.known && node.input_size() > 0) {
        // Shape inference could not see the shape value; read it from the constant feeding it.
        auto shape = constant_values.find(node.input(0));
        if (shape != constant_values.end()) {
          info.known = true;
          info.dims = Int64Values(*shape->second);
          const onnx::AttributeProto* value = FindAttribute(node, "value");
          info.element_bytes = value != nullptr && value->has_t() ? ElementBytes(value->t().data_type()) : 4;
        }
      }
    }
  }

  LayerGraph layers;
  UniqueNames names;
  absl::flat_hash_map<std::string, int32_t> producer;  // tensor -> layer
  absl::flat_hash_set<std::string> charged;            // parameters already charged to a layer
  const RooflineModel& roofline = options.roofline;
  for (int k = 0; k < graph->node_size(); ++k) {
    const onnx::NodeProto& node = graph->node(k);
    if (node.op_type() == "Constant" || node.op_type() == "ConstantOfShape") continue;
    const int32_t index = static_cast<int32_t>(layers.layers.size());
    LayerSpec layer;
    layer.name = names.Make(node.name().empty() ? absl::StrCat(node.op_type(), "_", k) : node.name());
    layer.type = node.op_type();

    std::vector<const TensorInfo*> inputs, outputs;
    double traffic = 0;
    absl::flat_hash_map<int32_t, size_t> edge_of_producer;  // one edge per producer, bytes summed
    for (const std::string& input : node.input()) {
      auto info = tensors.find(input);
      inputs.push_back(input.empty() || info == tensors.end() ? nullptr : &info->second);
      if (input.empty()) continue;
      const int64_t input_bytes = info == tensors.end() ? 0 : info->second.Bytes();
      if (parameters.contains(input)) {
        traffic += static_cast<double>(input_bytes);
        if (charged.insert(input).second) AddBytes(layer.parameter_bytes, input_bytes);
        continue;
      }
      if (constants.contains(input) || data_inputs.contains(input)) {
        traffic += static_cast<double>(input_bytes);
        continue;
      }
      auto from = producer.find(input);
      if (from == producer.end()) continue;  // unknown tensor (e.g. from a subgraph): no dependency
      traffic += static_cast<double>(input_bytes);
      auto [edge, inserted] = edge_of_producer.try_emplace(from->second, layers.edges.size());
      if (inserted) {
        layers.edges.push_back({from->second, index, input_bytes});
      } else {
        AddBytes(layers.edges[edge->second].bytes, input_bytes);
      }
    }
    for (const std::string& output : node.output()) {
      if (output.empty()) continue;
      auto info = tensors.find(output);
      outputs.push_back(info == tensors.end() ? nullptr : &info->second);
      const int64_t output_bytes = info == tensors.end() ? 0 : info->second.Bytes();
      AddBytes(layer.output_bytes, output_bytes);
      traffic += static_cast<double>(output_bytes);
      producer[output] = index;
    }
    if (IsView(node.op_type())) {
      layer.forward_ns = 0;
      layer.backward_ns = 0;
    } else {
      const double flops = NodeFlops(node, inputs, outputs);
      layer.forward_ns = RooflineNs(flops, traffic, roofline);
      const double backward_factor =
          IsMatrixOp(node.op_type()) ? options.training.backward_flops_factor : 1.0;
      layer.backward_ns = RooflineNs(flops * backward_factor, 2.0 * traffic, roofline);
    }
    layers.layers.push_back(std::move(layer));
  }
  if (layers.layers.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ONNX graph has only constants"));
  }
  return layers;
}

absl::StatusOr<v1::PlaceRequest> ImportOnnx(absl::string_view path, const ImportOptions& options) {
  absl::StatusOr<std::string> bytes = ReadInputFile(path);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<LayerGraph> layers = OnnxLayerGraph(path, *bytes, options);
  if (!layers.ok()) return layers.status();
  return MakeRequest(BuildLayerGraph(*layers, options.training, options.roofline),
                     options.cluster.value_or(DefaultCluster()));
}

}  // namespace placement::importers
