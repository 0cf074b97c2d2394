#!/usr/bin/env python3
"""TensorFlow Serving's own Classify client against Cadre's model server.

Sends the first --examples Fashion-MNIST test images as tf.train.Example protos (feature
"image", 784 floats) through the tensorflow-serving-api package's PredictionService.Classify
stub, plain and with the examples' features in an ExampleListWithContext, and through REST
:classify, and checks that each gives, per image, the classes "0".."9" with the
probabilities REST :predict (serving_default, the in-process Predictor) gives. Needs
tensorflow-cpu==2.15.* and tensorflow-serving-api==2.15.* (not dependencies of the build):

  build/examples/fashion_mnist --serve=runs/fmnist/export/latest --model_name=fmnist &
  python3 tools/compat/serving_classify_client.py --model_name=fmnist

Prints one JSON line; exits 1 when they disagree.
"""
import json
import sys
import urllib.request

import grpc
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import classification_pb2, prediction_service_pb2_grpc

from serving_client import client_arguments, test_images  # the same directory


def rest(port, model, verb, body):
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/models/{model}:{verb}",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return json.load(reply)


def example(image):
    return tf.train.Example(features=tf.train.Features(
        feature={"image": tf.train.Feature(float_list=tf.train.FloatList(value=image))}))


def scores_of(classifications):
    """[examples, 10] scores ordered by label, checking the labels are "0".."9"."""
    out = []
    for classes in classifications:
        labels = [label for label, _ in classes]
        assert labels == [str(k) for k in range(10)], labels
        out.append([score for _, score in classes])
    return np.array(out, dtype=np.float32)


def main():
    args = client_arguments()
    images = test_images(args.data_dir, args.examples)

    stub = prediction_service_pb2_grpc.PredictionServiceStub(
        grpc.insecure_channel(f"127.0.0.1:{args.grpc_port}"))
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = args.model_name
    request.model_spec.signature_name = "classification"
    for image in images:
        request.input.example_list.examples.append(example(image))
    response = stub.Classify(request, timeout=30)
    grpc_scores = scores_of([[(c.label, c.score) for c in item.classes]
                             for item in response.result.classifications])

    # The same images, the first one's features in the context and its example empty.
    with_context = classification_pb2.ClassificationRequest()
    with_context.model_spec.name = args.model_name  # no signature: the one classify signature
    listed = with_context.input.example_list_with_context
    listed.context.CopyFrom(example(images[0]))
    listed.examples.append(tf.train.Example())
    for image in images[1:]:
        listed.examples.append(example(image))
    context_response = stub.Classify(with_context, timeout=30)
    context_scores = scores_of([[(c.label, c.score) for c in item.classes]
                                for item in context_response.result.classifications])

    rest_scores = scores_of(rest(args.rest_port, args.model_name, "classify", {
        "signature_name": "classification",
        "examples": [{"image": image.tolist()} for image in images]})["results"])
    predicted = rest(args.rest_port, args.model_name, "predict",
                     {"instances": images.tolist()})["predictions"]
    probabilities = np.array([row["probabilities"] for row in predicted], dtype=np.float32)

    differences = {
        "grpc_classify_vs_predict": float(np.max(np.abs(grpc_scores - probabilities))),
        "grpc_with_context_vs_predict": float(np.max(np.abs(context_scores - probabilities))),
        "rest_classify_vs_predict": float(np.max(np.abs(rest_scores - probabilities))),
    }
    same = all(d <= 1e-6 for d in differences.values())
    print(json.dumps({
        "examples": args.examples,
        "version": response.model_spec.version.value,
        "signature": response.model_spec.signature_name,
        "context_signature": context_response.model_spec.signature_name,
        "top_classes": [int(np.argmax(row)) for row in grpc_scores[:8]],
        **differences,
        "same": same,
    }))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
