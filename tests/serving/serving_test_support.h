// What the serving tests share: a small model exported by a real Estimator, and a plain
// HTTP/1.1 client over a socket (the server must not be checked with its own parser).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "cadre/estimator/estimator.h"
#include "cadre/io/dataset.h"
#include "cadre/nn/nn.h"
#include "cadre/ops/nn.h"
#include "cadre/ops/reduce.h"

namespace cadre::testing {

inline constexpr int64_t kServingFeatures = 4;

// x [n, 4] from a fixed sequence; the label is the index of the largest of x's first three.
inline Tensor serving_examples(int64_t n, int offset = 0) {
  std::vector<float> x(static_cast<size_t>(n * kServingFeatures));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * (i + offset)));
  return Tensor::from_vector(x, Shape{n, kServingFeatures});
}

inline const std::vector<std::string> kServingClassNames = {"a", "b", "c"};

// Predict signatures serving_default (class and probabilities) and "scores" (logits); for
// Classify, "classification" (the probabilities, labelled a, b, c) and "classes" (the class
// id, labelled through a, b, c, without scores); for Regress, "regression" (the first logit).
inline EstimatorSpec serving_model_fn(const Features& features, const Tensor& labels, ModeKeys mode,
                                      const Params& params) {
  Tensor logits = nn::dense("logits", nn::dense("hidden", features.at("x"), 8, nn::relu), 3);
  if (mode == ModeKeys::kPredict) {
    return EstimatorSpec::predict(
        {{"class", argmax(logits, 1)},
         {"probabilities", softmax(logits)},
         {"logits", logits},
         {"value", logits.slice(1, 0, 1)}},
        {{"serving_default", {"class", "probabilities"}},
         {"scores", {"logits"}},
         {"classification", ExportOutput::classification("probabilities", kServingClassNames)},
         {"classes", ExportOutput::classification_with_classes("", "class", kServingClassNames)},
         {"regression", ExportOutput::regression("value")}});
  }
  Tensor loss = nn::sparse_softmax_cross_entropy(labels, logits);
  return EstimatorSpec::train(loss, nn::optimizers::adam(0.05));
}

// Trains the model in `model_dir` up to `steps` and exports it as version `version` of
// `export_base` (the export renamed to its number, as a copy into place would be).
inline std::string export_version(const std::string& model_dir, const std::string& export_base,
                                  int64_t steps, int64_t version) {
  RunConfig config;
  config.model_dir = model_dir;
  config.tf_random_seed = 7;
  config.save_checkpoints_steps = 1000;
  config.log_step_count_steps = 1000;
  Estimator estimator(serving_model_fn, config);
  estimator.train(
      [](const InputContext&) {
        Tensor x = serving_examples(64);
        Tensor y = argmax(x.slice(1, 0, 3), 1);
        return Dataset::from_tensor_slices(Features{{"x", x}}, y).repeat().batch(16);
      },
      {.max_steps = steps});
  std::string staging = export_base + "/staging";
  std::string dir = estimator.export_model(staging, Features{{"x", serving_examples(2)}});
  std::string target = export_base + "/" + std::to_string(version);
  std::filesystem::rename(dir, target);
  std::filesystem::remove_all(staging);
  return target;
}

struct HttpReply {
  int status = 0;
  std::string body;
};

// Sends `request` (raw bytes) on a fresh connection to 127.0.0.1:port and reads the reply
// to the end. Status 0: no reply.
inline HttpReply http_raw(int port, const std::string& request) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval timeout{20, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  HttpReply reply;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    return reply;
  }
  // The server may answer (413, say) and close before taking everything: not an error here.
  for (size_t sent = 0; sent < request.size();) {
    ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  std::string text;
  char chunk[65536];
  for (ssize_t n; (n = recv(fd, chunk, sizeof chunk, 0)) > 0;) text.append(chunk, n);
  close(fd);
  if (std::sscanf(text.c_str(), "HTTP/1.1 %d", &reply.status) != 1) return reply;
  size_t head_end = text.find("\r\n\r\n");
  if (head_end != std::string::npos) reply.body = text.substr(head_end + 4);
  return reply;
}

// One request ("Connection: close"), `headers` being extra "Name: value\r\n" lines.
inline HttpReply http_call(int port, const std::string& method, const std::string& target,
                           const std::string& body = "", const std::string& headers = "") {
  return http_raw(port, method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers +
                            "Content-Length: " + std::to_string(body.size()) +
                            "\r\nConnection: close\r\n\r\n" + body);
}

// {"instances": [[...], ...]} for the rows of x.
inline std::string instances_json(const Tensor& x) {
  std::vector<float> values = x.to_vector<float>();
  std::string json = "{\"instances\":[";
  for (int64_t row = 0; row < x.dim(0); ++row) {
    json += row ? ",[" : "[";
    for (int64_t col = 0; col < x.dim(1); ++col) {
      char number[32];
      std::snprintf(number, sizeof number, "%s%.9g", col ? "," : "", values[row * x.dim(1) + col]);
      json += number;
    }
    json += "]";
  }
  return json + "]}";
}

}  // namespace cadre::testing
