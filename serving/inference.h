// What the REST and gRPC APIs share: finding the version a request names, checking its
// inputs against the signature, running it (batched), the model's status and its
// signatures as TensorFlow Serving describes them, and the bearer-token check.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cadre/io/element.h"
#include "serving/batcher.h"
#include "serving/example_inputs.h"
#include "serving/model_versions.h"
#include "serving/proto/serving_apis.pb.h"

namespace cadre::serving_internal {

inline constexpr char kDefaultSignature[] = "serving_default";

struct Prediction {
  int64_t version = 0;
  std::string signature;
  std::map<std::string, Tensor> outputs;
  ExportOutput export_output;  // what the signature is
};

class Inference {
 public:
  Inference(ModelVersions& versions, Batcher& batcher) : versions_(versions), batcher_(batcher) {}

  // Runs `signature` (empty: serving_default) of the version asked for (none: the highest)
  // on `inputs`, keeping the outputs in `output_filter` (empty: all). Throws NotFoundError
  // for a model or version not served, InvalidArgumentError for an unknown signature or
  // output, a classify or regress signature (those take tf.Examples: run_examples), or
  // inputs missing, unknown, or of another dtype or per-example shape than the signature
  // takes; ResourceExhaustedError when overloaded.
  // `arrival` (from arrive(), taken when the request was received) lets a batch wait for
  // this request while it is decoded.
  Prediction predict(Batcher::Arrival arrival, std::optional<int64_t> version,
                     const std::string& signature,
                     const std::function<io::Features(const TensorSpecs&)>& decode,
                     const std::vector<std::string>& output_filter = {});

  // Runs the classification (kind kClassify) or regression (kRegress) signature named on
  // `batch`, the examples turned into the signature's inputs by examples_to_inputs. With no
  // name: serving_default when it is of that kind, else the version's one signature of that
  // kind (Cadre's serving_default is usually a predict signature, unlike a TensorFlow canned
  // estimator's). Throws as predict does, and InvalidArgumentError naming the signatures of
  // the kind when the one asked for is of another kind or none is found.
  Prediction run_examples(Batcher::Arrival arrival, std::optional<int64_t> version,
                          const std::string& signature, ExportOutput::Kind kind,
                          const ExampleBatch& batch);

  Batcher::Arrival arrive() { return Batcher::Arrival(batcher_); }
  ModelVersions& versions() { return versions_; }

 private:
  ModelVersions& versions_;
  Batcher& batcher_;
};

// Throws InvalidArgumentError unless `inputs` are exactly the inputs of `specs`, each with
// a batch dimension (the same for all) and the spec's dtype and per-example shape.
void check_inputs(const io::Features& inputs, const TensorSpecs& specs);

// The status of the version asked for (NotFoundError when not served) or of every served
// version (NotFoundError when there is none).
tensorflow::serving::GetModelStatusResponse model_status(const ModelVersions& versions,
                                                         std::optional<int64_t> version);

// A version's signatures as TensorFlow's SignatureDefs (batch dimension -1): a predict
// signature with its tensors, a classify or regress one as TensorFlow writes them
// (serialized tf.Examples in "inputs"; "classes" and "scores", or "outputs").
tensorflow::serving::SignatureDefMap signature_defs(const LoadedVersion& version);

// Whether `authorization` (an "Authorization" header or metadata value) carries `token`;
// always true when no token is required. Compared in constant time.
bool authorized(const std::string& token, std::string_view authorization);

}  // namespace cadre::serving_internal
