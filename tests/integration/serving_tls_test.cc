// The model server over TLS (ServingOptions::tls_cert_file/tls_key_file): an OpenSSL client
// that checks the server's certificate against the CA gets REST predictions, and a gRPC TLS
// channel gets Predict; a plain HTTP client on the TLS port is told so and the server serves
// on; a client that never finishes its handshake is cut off after the request timeout while
// others are served; unreadable or mismatched files are refused at start. Certificates are
// made at test time (cadre_launch --tls's throwaway CA).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <chrono>
#include <filesystem>

#include "cadre/base/errors.h"
#include "cadre/estimator/predictor.h"
#include "cadre/serving/model_server.h"
#include "serving/proto/serving_apis.grpc.pb.h"
#include "tests/serving/predict_request.h"
#include "tests/serving/serving_test_support.h"
#include "tests/support/mini_json.h"
#include "tests/support/temp_dir.h"
#include "tools/cadre_launch/tls_files.h"

namespace cadre {
namespace {

using testing::JsonParser;

int connect_loopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval timeout{20, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// One HTTPS request ("Connection: close") from an OpenSSL client that verifies the
// server's certificate (CA and the address 127.0.0.1). Status 0: no reply (the handshake or
// the verification failed).
testing::HttpReply https_call(int port, const std::string& ca_file, const std::string& method,
                              const std::string& target, const std::string& body = "") {
  testing::HttpReply reply;
  SSL_CTX* context = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nullptr);
  EXPECT_EQ(SSL_CTX_load_verify_locations(context, ca_file.c_str(), nullptr), 1);
  int fd = connect_loopback(port);
  SSL* ssl = SSL_new(context);
  X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), "127.0.0.1");
  SSL_set_fd(ssl, fd);
  if (fd >= 0 && SSL_connect(ssl) == 1) {
    std::string request =
        method + " " + target +
        " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " + std::to_string(body.size()) +
        "\r\nConnection: close\r\n\r\n" + body;
    SSL_write(ssl, request.data(), static_cast<int>(request.size()));
    std::string text;
    char chunk[16384];
    for (int n; (n = SSL_read(ssl, chunk, sizeof chunk)) > 0;) text.append(chunk, n);
    if (std::sscanf(text.c_str(), "HTTP/1.1 %d", &reply.status) == 1) {
      size_t head_end = text.find("\r\n\r\n");
      if (head_end != std::string::npos) reply.body = text.substr(head_end + 4);
    }
  }
  ERR_clear_error();
  SSL_free(ssl);
  SSL_CTX_free(context);
  if (fd >= 0) close(fd);
  return reply;
}

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    version_dir_ =
        new std::string(testing::export_version(dir_->file("model"), dir_->file("export"), 10, 1));
    std::filesystem::create_directories(dir_->file("pki"));
    pki_ = new std::map<std::string, launch::TlsFiles>(
        launch::make_job_pki(dir_->file("pki"), {"server", "other"}, {"127.0.0.1", "localhost"}));
  }
  static void TearDownTestSuite() {
    delete pki_;
    delete version_dir_;
    delete dir_;
  }

  static ServingOptions tls_options() {
    ServingOptions options;
    options.export_base = dir_->file("export");
    options.model_name = "toy";
    options.rest_port = 0;
    options.grpc_port = 0;
    options.tls_cert_file = pki_->at("server").cert;
    options.tls_key_file = pki_->at("server").key;
    return options;
  }

  static const std::string& ca() { return pki_->at("server").ca; }

  static testing::TempDir* dir_;
  static std::string* version_dir_;
  static std::map<std::string, launch::TlsFiles>* pki_;
};

testing::TempDir* TlsTest::dir_ = nullptr;
std::string* TlsTest::version_dir_ = nullptr;
std::map<std::string, launch::TlsFiles>* TlsTest::pki_ = nullptr;

TEST_F(TlsTest, RestAndGrpcOverTlsAreThePredictors) {
  auto server = ModelServer::start(testing::serving_model_fn, tls_options());
  Tensor x = testing::serving_examples(3, 500);
  auto expected = Predictor::load(*version_dir_, testing::serving_model_fn)->predict({{"x", x}});
  std::vector<float> probabilities = expected.at("probabilities").to_vector<float>();

  auto reply = https_call(server->rest_port(), ca(), "POST", "/v1/models/toy:predict",
                          testing::instances_json(x));
  ASSERT_EQ(reply.status, 200) << reply.body;
  auto rows = JsonParser::parse(reply.body)["predictions"].array();
  ASSERT_EQ(rows.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_NEAR(rows[i]["probabilities"].array()[k].number(), probabilities[i * 3 + k], 1e-6);
    }
  }
  // A client trusting another CA does not get through.
  std::filesystem::create_directories(dir_->file("another_ca"));
  auto stranger = launch::make_job_pki(dir_->file("another_ca"), {"x"}, {"127.0.0.1"});
  EXPECT_EQ(https_call(server->rest_port(), stranger.at("x").ca, "GET", "/v1/models/toy").status,
            0);

  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = posix_env()->read_file(ca());
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server->grpc_port()),
                                     grpc::SslCredentials(ssl));
  auto stub = tensorflow::serving::PredictionService::NewStub(channel);
  tensorflow::serving::PredictRequest request = testing::predict_request(x);
  tensorflow::serving::PredictResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  grpc::Status status = stub->Predict(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  for (int i = 0; i < 9; ++i) {
    EXPECT_NEAR(response.outputs().at("probabilities").float_val(i), probabilities[i], 1e-6);
  }

  // A plaintext gRPC channel gets no call through.
  auto plain = tensorflow::serving::PredictionService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(server->grpc_port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext plain_context;
  plain_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  EXPECT_FALSE(plain->Predict(&plain_context, request, &response).ok());
}

TEST_F(TlsTest, APlainClientIsToldAndTheServerServesOn) {
  auto server = ModelServer::start(testing::serving_model_fn, tls_options());
  int port = server->rest_port();
  auto reply = testing::http_call(port, "POST", "/v1/models/toy:predict",
                                  testing::instances_json(testing::serving_examples(1)));
  EXPECT_EQ(reply.status, 400);
  EXPECT_NE(reply.body.find("this port speaks TLS"), std::string::npos) << reply.body;
  // Junk that is neither HTTP nor TLS: the connection just ends.
  EXPECT_EQ(testing::http_raw(port, std::string("\x16\x03\x01\x00\x05junk!", 10)).status, 0);
  EXPECT_EQ(https_call(port, ca(), "GET", "/v1/models/toy").status, 200);
}

TEST_F(TlsTest, AHandshakeThatStallsIsCutOffWhileOthersAreServed) {
  ServingOptions options = tls_options();
  options.request_timeout_secs = 0.5;
  auto server = ModelServer::start(testing::serving_model_fn, options);
  int port = server->rest_port();
  // One client says nothing; another starts a handshake (a record header) and stalls.
  int silent = connect_loopback(port);
  int stalled = connect_loopback(port);
  ASSERT_GE(silent, 0);
  ASSERT_GE(stalled, 0);
  send(stalled, "\x16\x03\x01\x02\x00", 5, MSG_NOSIGNAL);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(https_call(port, ca(), "GET", "/v1/models/toy").status, 200);
  char byte;
  EXPECT_LE(recv(silent, &byte, 1, 0), 0);  // closed by the server, not by our 20 s timeout
  EXPECT_LE(recv(stalled, &byte, 1, 0), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  close(silent);
  close(stalled);
  EXPECT_EQ(https_call(port, ca(), "GET", "/v1/models/toy").status, 200);
}

TEST_F(TlsTest, UnreadableOrMismatchedFilesAreRefusedAtStart) {
  auto refused = [](ServingOptions options, const std::string& says) {
    try {
      ModelServer::start(testing::serving_model_fn, options);
      ADD_FAILURE() << "started; expected: " << says;
    } catch (const InvalidArgumentError& error) {
      EXPECT_NE(std::string(error.what()).find(says), std::string::npos) << error.what();
    }
  };
  ServingOptions options = tls_options();
  options.tls_key_file.clear();
  refused(options, "needs both tls_cert_file and tls_key_file");
  options = tls_options();
  options.tls_cert_file = dir_->file("missing.pem");
  refused(options, "cannot read a PEM certificate from " + dir_->file("missing.pem"));
  options = tls_options();
  options.tls_key_file = pki_->at("other").key;
  refused(options, "is not the key of the certificate");
  options = tls_options();
  options.rest_port = -1;  // checked even when only gRPC is served
  options.tls_key_file = pki_->at("other").key;
  refused(options, "is not the key of the certificate");
}

}  // namespace
}  // namespace cadre
