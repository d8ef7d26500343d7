// onnx_importer.h — imports ONNX models (binary ModelProto, optionally gzipped) via Debian's libonnx.
//
// The model's shapes are completed with ONNX shape inference (after --onnx_batch_size, if given, is set
// on the data inputs). Then:
//   ops      every node except Constant / ConstantOfShape, named by node.name (else "<OpType>_<k>"),
//            type = op_type;
//   edges    producer -> consumer per tensor, bytes = prod(shape) x element size;
//   params   initializers, ConstantOfShape outputs (the "light" model zoo files replace weights by
//            ConstantOfShape), and graph inputs used only in weight / bias slots (input index >= 1):
//            their bytes are the consuming layer's parameter bytes (charged to the first consumer);
//   costs    a roofline (roofline.h) over estimated FLOPs and bytes read + written:
//              Conv / ConvTranspose  2 * N * Cout * H'W' * (Cin / group) * kh * kw
//              Gemm / MatMul         2 * M * N * K (batched for MatMul)
//              pooling               output elements x kernel area; Global*Pool: input elements
//              BatchNorm / LRN / Softmax / LogSoftmax  4 / 2*size / 5 ... x elements
//              other ops             one FLOP per output element
//            Reshape / Flatten / Squeeze / Unsqueeze / Identity / Shape are views: no time.
//   training (default) backward = roofline with backward_flops_factor x FLOPs for Conv / Gemm / MatMul
//            (1x for other ops) and twice the traffic; expansion as in training_graph.h.
// Cluster: --cluster or DefaultCluster().
//
// Example:
//   ImportOptions options;
//   options.onnx_batch_size = 32;
//   absl::StatusOr<v1::PlaceRequest> r = ImportOnnx("light_resnet50.onnx", options);
#ifndef PLACEMENT_SERVICE_ENGINE_IMPORTERS_ONNX_IMPORTER_H_
#define PLACEMENT_SERVICE_ENGINE_IMPORTERS_ONNX_IMPORTER_H_

#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "placement/v1/placement.pb.h"
#include "service/importers/import_options.h"
#include "service/importers/training_graph.h"

namespace placement::importers {

absl::StatusOr<v1::PlaceRequest> ImportOnnx(absl::string_view path, const ImportOptions& options);

// The forward layer graph with roofline costs, before training expansion (`bytes` is the serialized
// ModelProto; `path` only names it in errors).
absl::StatusOr<LayerGraph> OnnxLayerGraph(absl::string_view path, absl::string_view bytes,
                                          const ImportOptions& options);

}  // namespace placement::importers

#endif  // PLACEMENT_SERVICE_ENGINE_IMPORTERS_ONNX_IMPORTER_H_
