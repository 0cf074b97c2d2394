// IDX files (the MNIST and Fashion-MNIST format), optionally gzip-compressed.
#pragma once

#include <memory>
#include <string>

#include "cadre/base/env.h"
#include "cadre/tensor/tensor.h"

namespace cadre::io {

// Reads an IDX file (gzip-compressed or plain, whatever its name) through `env` (the real
// file system when null) into a CPU tensor of the file's element type and dimensions
// (uint8 for the MNIST family). Throws NotFoundError when the file is missing, DataLossError
// naming the file and byte offset when it is truncated or malformed, and the Env's typed
// error naming the file when a read fails.
Tensor read_idx(const std::string& path, const std::shared_ptr<Env>& env = nullptr);

enum class Split { kTrain, kTest };

// Images [N, 28, 28] uint8 and labels [N] uint8 of an MNIST-family directory holding
// {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz (Debian's dataset-fashion-mnist installs
// them in /usr/share/datasets/fashion-mnist).
struct ImagesAndLabels {
  Tensor images;
  Tensor labels;
};
ImagesAndLabels read_mnist(const std::string& directory, Split split,
                           const std::shared_ptr<Env>& env = nullptr);

}  // namespace cadre::io
