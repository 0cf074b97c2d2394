#!/usr/bin/env python3
"""TensorFlow Serving's own Python client against Cadre's model server.

Sends the first --examples Fashion-MNIST test images to a running server through the
tensorflow-serving-api package's PredictionService and ModelService stubs (gRPC, tensors
made and read by TensorFlow's make_tensor_proto / make_ndarray) and through REST, and
checks that both give the same predictions and that status and metadata parse. Needs
tensorflow-cpu==2.15.* and tensorflow-serving-api==2.15.* (not dependencies of the build):

  build/examples/fashion_mnist --serve=runs/fmnist/export/latest --model_name=fmnist &
  python3 tools/compat/serving_client.py --model_name=fmnist

Prints one JSON line; exits 1 when the two APIs disagree.
"""
import argparse
import gzip
import json
import sys
import urllib.request

import grpc
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import (get_model_metadata_pb2, get_model_status_pb2,
                                     model_service_pb2_grpc, predict_pb2,
                                     prediction_service_pb2_grpc)


def test_images(data_dir, count):
    with gzip.open(f"{data_dir}/t10k-images-idx3-ubyte.gz", "rb") as f:
        data = f.read()
    pixels = np.frombuffer(data, dtype=np.uint8, offset=16)[: count * 784]
    return (pixels.astype(np.float32) / 255.0).reshape(count, 784)


def rest_predictions(port, model, images):
    body = json.dumps({"instances": images.tolist()}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/models/{model}:predict",
                                     data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return json.load(reply)["predictions"]


def client_arguments():
    """The flags of this client and serving_classify_client.py: where the server listens and
    which Fashion-MNIST test images to send."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--rest_port", type=int, default=8501)
    parser.add_argument("--grpc_port", type=int, default=8500)
    parser.add_argument("--model_name", default="fashion_mnist")
    parser.add_argument("--examples", type=int, default=16)
    parser.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    return parser.parse_args()


def main():
    args = client_arguments()
    images = test_images(args.data_dir, args.examples)

    channel = grpc.insecure_channel(f"127.0.0.1:{args.grpc_port}")
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    request = predict_pb2.PredictRequest()
    request.model_spec.name = args.model_name
    request.model_spec.signature_name = "serving_default"
    request.inputs["image"].CopyFrom(tf.make_tensor_proto(images))
    response = stub.Predict(request, timeout=30)
    grpc_probabilities = tf.make_ndarray(response.outputs["probabilities"])
    grpc_classes = tf.make_ndarray(response.outputs["class"])

    metadata_request = get_model_metadata_pb2.GetModelMetadataRequest()
    metadata_request.model_spec.name = args.model_name
    metadata_request.metadata_field.append("signature_def")
    metadata = stub.GetModelMetadata(metadata_request, timeout=30)
    signatures = get_model_metadata_pb2.SignatureDefMap()
    metadata.metadata["signature_def"].Unpack(signatures)
    status_request = get_model_status_pb2.GetModelStatusRequest()
    status_request.model_spec.name = args.model_name
    models = model_service_pb2_grpc.ModelServiceStub(channel)
    status = models.GetModelStatus(status_request, timeout=30)

    rows = rest_predictions(args.rest_port, args.model_name, images)
    rest_probabilities = np.array([row["probabilities"] for row in rows], dtype=np.float32)
    rest_classes = np.array([row["class"] for row in rows], dtype=np.int64)
    difference = float(np.max(np.abs(rest_probabilities - grpc_probabilities)))
    same = difference <= 1e-6 and bool(np.all(rest_classes == grpc_classes))
    print(json.dumps({
        "examples": args.examples,
        "version": response.model_spec.version.value,
        "state": get_model_status_pb2.ModelVersionStatus.State.Name(
            status.model_version_status[0].state),
        "signatures": sorted(signatures.signature_def.keys()),
        "grpc_output_shape": list(grpc_probabilities.shape),
        "classes": grpc_classes.tolist()[:8],
        "max_abs_diff_rest_vs_grpc": difference,
        "same": same,
    }))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
