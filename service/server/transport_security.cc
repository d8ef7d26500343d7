#include "service/server/transport_security.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <fstream>
#include <sstream>

#include <grpcpp/security/server_credentials.h>

#include "absl/strings/str_cat.h"

namespace placement::server {
namespace {

absl::StatusOr<std::string> ReadPemFile(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(flag, ": cannot read ", path));
  std::ostringstream contents;
  contents << in.rdbuf();
  if (contents.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " is empty"));
  }
  return contents.str();
}

struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Deleter {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};

std::unique_ptr<BIO, BioDeleter> MemoryBio(const std::string& pem) {
  return std::unique_ptr<BIO, BioDeleter>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

std::unique_ptr<X509, X509Deleter> FirstCertificate(const std::string& pem) {
  auto bio = MemoryBio(pem);
  return std::unique_ptr<X509, X509Deleter>(
      PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

// "Dec  1 23:09:10 2026 GMT".
std::string AsnTimeText(const ASN1_TIME* time) {
  auto bio = std::unique_ptr<BIO, BioDeleter>(BIO_new(BIO_s_mem()));
  if (bio == nullptr || ASN1_TIME_print(bio.get(), time) != 1) return "?";
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

// Checks what gRPC would otherwise only report as failed handshakes.
absl::Status CheckCertificateAndKey(const std::string& cert_pem, const std::string& key_pem,
                                    const TransportSecurityOptions& security) {
  std::unique_ptr<X509, X509Deleter> cert = FirstCertificate(cert_pem);
  if (cert == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_cert: ", security.cert_file, " holds no PEM certificate"));
  }
  auto bio = MemoryBio(key_pem);
  std::unique_ptr<EVP_PKEY, KeyDeleter> key(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_key: ", security.key_file, " holds no (unencrypted) PEM private key"));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("--tls_key: ", security.key_file,
                                                   " does not match the certificate in ",
                                                   security.cert_file));
  }
  // Every client would refuse an expired or not-yet-valid certificate, as a failed handshake that says
  // nothing about dates on either side: refuse to start instead, naming them.
  const ASN1_TIME* not_before = X509_get0_notBefore(cert.get());
  const ASN1_TIME* not_after = X509_get0_notAfter(cert.get());
  const bool too_early = X509_cmp_current_time(not_before) > 0;
  const bool expired = X509_cmp_current_time(not_after) < 0;
  if (too_early || expired) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--tls_cert: the certificate in ", security.cert_file,
        too_early ? " is not valid yet" : " has expired", " (valid from ", AsnTimeText(not_before),
        " to ", AsnTimeText(not_after), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const TransportSecurityOptions& security) {
  const bool any_file = !security.cert_file.empty() || !security.key_file.empty() ||
                        !security.client_ca_file.empty();
  if (security.insecure) {
    if (any_file) {
      return absl::InvalidArgumentError(
          "--insecure contradicts --tls_cert / --tls_key / --tls_client_ca: choose TLS or "
          "plaintext");
    }
    return grpc::InsecureServerCredentials();
  }
  if (!any_file) {
    return absl::InvalidArgumentError(
        "refusing to serve without transport security: give --tls_cert and --tls_key (TLS; add "
        "--tls_client_ca for mutual TLS), or --insecure to serve plaintext on purpose (local use "
        "and tests)");
  }
  if (security.cert_file.empty() || security.key_file.empty()) {
    return absl::InvalidArgumentError(
        security.cert_file.empty() && security.key_file.empty()
            ? "--tls_client_ca needs --tls_cert and --tls_key (the server's own certificate)"
            : "--tls_cert and --tls_key go together");
  }
  absl::StatusOr<std::string> cert = ReadPemFile(security.cert_file, "--tls_cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPemFile(security.key_file, "--tls_key");
  if (!key.ok()) return key.status();
  if (absl::Status checked = CheckCertificateAndKey(*cert, *key, security); !checked.ok()) {
    return checked;
  }

  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  if (!security.client_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadPemFile(security.client_ca_file, "--tls_client_ca");
    if (!ca.ok()) return ca.status();
    if (FirstCertificate(*ca) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tls_client_ca: ", security.client_ca_file, " holds no PEM certificate"));
    }
    ssl.pem_root_certs = *ca;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  } else {
    ssl.client_certificate_request = GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
  }
  return grpc::SslServerCredentials(ssl);
}

std::string DescribeTransportSecurity(const TransportSecurityOptions& security) {
  if (security.insecure) return "plaintext (--insecure)";
  return security.client_ca_file.empty() ? "TLS" : "mutual TLS";
}

}  // namespace placement::server
