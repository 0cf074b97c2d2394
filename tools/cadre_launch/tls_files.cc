#include "tools/cadre_launch/tls_files.h"

#include <arpa/inet.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cstdio>
#include <memory>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::launch {
namespace {

struct KeyDeleter {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct CertDeleter {
  void operator()(X509* cert) const { X509_free(cert); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyDeleter>;
using Cert = std::unique_ptr<X509, CertDeleter>;

void check(bool ok, const std::string& what) {
  if (!ok) throw UnavailableError(str_cat("cadre_launch --tls: ", what, " failed"));
}

Key new_key() {
  Key key(EVP_EC_gen("P-256"));
  check(key != nullptr, "making an ECDSA key");
  return key;
}

void add_extension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX context;
  X509V3_set_ctx_nodb(&context);
  X509V3_set_ctx(&context, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &context, nid, value.c_str());
  check(extension != nullptr, str_cat("the certificate extension ", value));
  X509_add_ext(cert, extension, -1);
  X509_EXTENSION_free(extension);
}

// A certificate for `key` named `name`, signed by issuer_key (itself when issuer is null).
Cert new_cert(EVP_PKEY* key, const std::string& name, X509* issuer, EVP_PKEY* issuer_key,
              long serial, const std::string& alt_names) {
  Cert cert(X509_new());
  check(cert != nullptr, "making a certificate");
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -300);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* subject = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(name.c_str()), -1, -1, 0);
  X509* signer = issuer ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  if (issuer == nullptr) {
    add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE");
    add_extension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE");
    add_extension(cert.get(), signer, NID_key_usage, "critical,digitalSignature");
    add_extension(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth");
    add_extension(cert.get(), signer, NID_subject_alt_name, alt_names);
  }
  check(X509_sign(cert.get(), issuer_key, EVP_sha256()) > 0, "signing a certificate");
  return cert;
}

void write_pem(const std::string& path, EVP_PKEY* key, X509* cert) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  check(file != nullptr, str_cat("creating ", path));
  ::fchmod(::fileno(file), 0600);
  bool ok = key ? PEM_write_PrivateKey(file, key, nullptr, nullptr, 0, nullptr, nullptr) == 1
                : PEM_write_X509(file, cert) == 1;
  ok = std::fclose(file) == 0 && ok;
  check(ok, str_cat("writing ", path));
}

}  // namespace

std::map<std::string, TlsFiles> make_job_pki(const std::string& dir,
                                             const std::vector<std::string>& tasks,
                                             const std::vector<std::string>& hosts) {
  std::string alt_names;
  for (const std::string& host : hosts) {
    in6_addr ip;
    bool is_ip = ::inet_pton(AF_INET, host.c_str(), &ip) == 1 ||
                 ::inet_pton(AF_INET6, host.c_str(), &ip) == 1;
    alt_names += str_cat(alt_names.empty() ? "" : ",", is_ip ? "IP:" : "DNS:", host);
  }
  Key ca_key = new_key();
  Cert ca = new_cert(ca_key.get(), "cadre job CA", nullptr, ca_key.get(), 1, "");
  std::string ca_path = dir + "/ca.pem";
  write_pem(ca_path, nullptr, ca.get());
  std::map<std::string, TlsFiles> files;
  long serial = 2;
  for (const std::string& task : tasks) {
    Key key = new_key();
    Cert cert = new_cert(key.get(), task, ca.get(), ca_key.get(), serial++, alt_names);
    std::string file_name = task;
    for (char& c : file_name) {
      if (c == ':') c = '_';
    }
    std::string stem = dir + "/" + file_name;
    write_pem(stem + ".key", key.get(), nullptr);
    write_pem(stem + ".crt", nullptr, cert.get());
    files[task] = {ca_path, stem + ".crt", stem + ".key"};
  }
  return files;
}

}  // namespace cadre::launch
