// The TLS files: partial flag sets and bad files are refused with the flag
// and path named; real certificates load into usable credentials.
#include "rpc/tls.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"
#include "tests/test_certs.h"

namespace lockstep {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(TlsTest, NoFlagsMeansTlsOff) {
  absl::StatusOr<TlsFiles> tls = LoadTlsFiles(TlsPaths(), TlsRole::kDaemon);
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_FALSE(tls->enabled());
}

TEST(TlsTest, PartialSetsAreRefusedNamingTheMissingFlag) {
  struct Case {
    TlsPaths paths;
    TlsRole role;
    const char* missing;
  };
  const Case cases[] = {
      {{"c.pem", "", "ca.pem"}, TlsRole::kDaemon, "--tls-key is not"},
      {{"", "k.pem", "ca.pem"}, TlsRole::kClient, "--tls-cert is not"},
      {{"c.pem", "k.pem", ""}, TlsRole::kClient, "--tls-ca is not"},
      {{"", "", "ca.pem"}, TlsRole::kDaemon, "--tls-cert and --tls-key"},
  };
  for (const Case& c : cases) {
    absl::Status s = CheckTlsPaths(c.paths, c.role);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_THAT(s.message(), HasSubstr(c.missing));
    // Refused before any file is read.
    EXPECT_TRUE(
        absl::IsInvalidArgument(LoadTlsFiles(c.paths, c.role).status()));
  }
  // A job client may trust the CA without a certificate of its own.
  EXPECT_TRUE(CheckTlsPaths({"", "", "ca.pem"}, TlsRole::kClient).ok());
}

TEST(TlsTest, MissingFileNamesTheFlagAndThePath) {
  const std::string path = "/nonexistent/lockstep/ca.pem";
  absl::StatusOr<TlsFiles> tls = LoadTlsFiles({"", "", path}, TlsRole::kClient);
  EXPECT_TRUE(absl::IsNotFound(tls.status())) << tls.status();
  EXPECT_THAT(tls.status().message(),
              AllOf(HasSubstr("--tls-ca"), HasSubstr(path)));
}

class TlsFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::NewTempDir("tls");
    std::string why;
    ASSERT_TRUE(testing::MakeTestCerts(dir_, &certs_, &why)) << why;
  }
  std::string dir_;
  testing::TestCerts certs_;
};

TEST_F(TlsFilesTest, EmptyAndNonPemFilesAreRefused) {
  const std::string empty = dir_ + "/empty.pem", text = dir_ + "/text.pem";
  testing::WriteStringToFile(empty, "\n");
  testing::WriteStringToFile(text, "not a certificate\n");
  absl::Status s =
      LoadTlsFiles({empty, certs_.worker_key, certs_.ca}, TlsRole::kDaemon)
          .status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), AllOf(HasSubstr("--tls-cert"), HasSubstr(empty),
                                 HasSubstr("empty")));
  s = LoadTlsFiles({certs_.worker_cert, text, certs_.ca}, TlsRole::kDaemon)
          .status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), AllOf(HasSubstr("--tls-key"), HasSubstr(text),
                                 HasSubstr("not a PEM file")));
  // A key given where the CA certificate belongs.
  s = LoadTlsFiles({"", "", certs_.worker_key}, TlsRole::kClient).status();
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("--tls-ca"), HasSubstr("no PEM certificate")));
}

TEST_F(TlsFilesTest, KeyOfAnotherCertificateIsRefused) {
  absl::Status s =
      LoadTlsFiles({certs_.worker_cert, certs_.rogue_key, certs_.ca},
                   TlsRole::kDaemon)
          .status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr(certs_.rogue_key), HasSubstr("is not the key of"),
                    HasSubstr(certs_.worker_cert)));
}

// A key with a passphrase is refused at once: OpenSSL's default callback
// would ask on the terminal, where a daemon waits for ever.
TEST_F(TlsFilesTest, AKeyWithAPassphraseIsRefusedWithoutAPrompt) {
  const std::string enc = dir_ + "/enc.key";
  testing::RunResult r =
      testing::RunProcess({"/usr/bin/openssl", "pkey", "-in", certs_.worker_key,
                           "-aes256", "-passout", "pass:secret", "-out", enc},
                          dir_, 30);
  ASSERT_EQ(r.exit.exit_code, 0) << r.err;
  absl::Status s =
      LoadTlsFiles({certs_.worker_cert, enc, certs_.ca}, TlsRole::kDaemon)
          .status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr(enc), HasSubstr("not a PEM private key without "
                                              "a passphrase")));
}

// A certificate whose notBefore is in the future is refused at start (each
// peer refused it with "certificate verify failed").
TEST_F(TlsFilesTest, ACertificateNotValidYetIsRefused) {
  BIO* in = BIO_new_file(certs_.worker_key.c_str(), "r");
  ASSERT_NE(in, nullptr);
  EVP_PKEY* key = PEM_read_bio_PrivateKey(in, nullptr, nullptr, nullptr);
  BIO_free(in);
  ASSERT_NE(key, nullptr);
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 7);
  X509_gmtime_adj(X509_getm_notBefore(x), 365L * 86400);
  X509_gmtime_adj(X509_getm_notAfter(x), 2 * 365L * 86400);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("future"),
                             -1, -1, 0);
  X509_set_issuer_name(x, name);
  X509_set_pubkey(x, key);
  ASSERT_GT(X509_sign(x, key, EVP_sha256()), 0);
  const std::string future = dir_ + "/future.pem";
  BIO* out = BIO_new_file(future.c_str(), "w");
  ASSERT_NE(out, nullptr);
  PEM_write_bio_X509(out, x);
  BIO_free(out);
  X509_free(x);
  EVP_PKEY_free(key);
  absl::Status s =
      LoadTlsFiles({future, certs_.worker_key, certs_.ca}, TlsRole::kDaemon)
          .status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), AllOf(HasSubstr(future),
                                 HasSubstr("a certificate in it is not valid "
                                           "yet")));
}

// A worker's certificate must name the address its peers dial.
TEST_F(TlsFilesTest, ACertificateThatDoesNotNameTheAddressIsRefused) {
  absl::StatusOr<TlsFiles> worker = LoadTlsFiles(
      {certs_.worker_cert, certs_.worker_key, certs_.ca}, TlsRole::kDaemon);
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_TRUE(CheckCertificateNames(*worker, "127.0.0.1:5000").ok());
  absl::Status s = CheckCertificateNames(*worker, "127.0.0.9:5000");
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("--tls-cert does not name \"127.0.0.9\", the "
                              "address peers dial (127.0.0.9:5000)"),
                    HasSubstr("subjectAltName IP:127.0.0.9")));
  // Names as DNS SANs: the coordinator's names localhost, the worker's not.
  EXPECT_FALSE(CheckCertificateNames(*worker, "localhost:1").ok());
  absl::StatusOr<TlsFiles> coordinator =
      LoadTlsFiles({certs_.coordinator_cert, certs_.coordinator_key, certs_.ca},
                   TlsRole::kDaemon);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  EXPECT_TRUE(CheckCertificateNames(*coordinator, "localhost:1").ok());
  EXPECT_TRUE(CheckCertificateNames(TlsFiles(), "anything:1").ok());
}

TEST_F(TlsFilesTest, CompleteSetsLoadIntoCredentials) {
  absl::StatusOr<TlsFiles> daemon = LoadTlsFiles(
      {certs_.worker_cert, certs_.worker_key, certs_.ca}, TlsRole::kDaemon);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  EXPECT_TRUE(daemon->enabled());
  EXPECT_THAT(daemon->cert, HasSubstr("-----BEGIN CERTIFICATE-----"));
  EXPECT_THAT(daemon->key, HasSubstr("PRIVATE KEY-----"));
  EXPECT_NE(MakeChannelCredentials(*daemon), nullptr);
  EXPECT_NE(
      MakeServerCredentials(*daemon, ClientCertificates::kRequireAndVerify),
      nullptr);

  absl::StatusOr<TlsFiles> client =
      LoadTlsFiles({"", "", certs_.ca}, TlsRole::kClient);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE(client->enabled());
  EXPECT_TRUE(client->cert.empty());
  EXPECT_NE(MakeChannelCredentials(*client), nullptr);
}

TEST(TlsTest, LoopbackAddresses) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1:7070"));
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.2:0"));
  EXPECT_TRUE(IsLoopbackAddress("localhost:7070"));
  EXPECT_TRUE(IsLoopbackAddress("[::1]:7070"));
  EXPECT_FALSE(IsLoopbackAddress("0.0.0.0:7070"));
  EXPECT_FALSE(IsLoopbackAddress("[::]:7070"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.5:7070"));
  EXPECT_FALSE(IsLoopbackAddress(":7070"));
}

TEST(TlsTest, HintsOnlyWhereTlsMayBeTheCause) {
  const absl::Status closed = absl::UnavailableError("x: Socket closed");
  EXPECT_THAT(
      AddTlsHint(closed, TlsFiles(), "the coordinator", "--tls-ca").message(),
      HasSubstr("if the coordinator uses TLS, pass --tls-ca"));
  TlsFiles on;
  on.ca = "pem";
  const absl::Status s = AddTlsHint(closed, on, "the coordinator", "--tls-ca");
  EXPECT_TRUE(absl::IsUnavailable(s));
  EXPECT_THAT(s.message(), HasSubstr("is the coordinator using TLS with the "
                                     "same CA as --tls-ca"));
  const absl::Status refused = absl::UnavailableError("x: Connection refused");
  EXPECT_EQ(AddTlsHint(refused, TlsFiles(), "the coordinator", "--tls-ca"),
            refused);
  const absl::Status not_found = absl::NotFoundError("no job");
  EXPECT_EQ(AddTlsHint(not_found, on, "the coordinator", "--tls-ca"),
            not_found);
  EXPECT_THAT(AddTlsHint(closed, TlsFiles(), "p", "--tls-ca").message(),
              Not(HasSubstr("same CA")));
  // An HTTP/1 server (the dashboard's port) and a name that does not
  // resolve are not TLS's doing: no TLS hint.
  const absl::Status http1 = absl::UnavailableError(
      "x: peer unreachable or gone (Trying to connect an http1.x server)");
  EXPECT_EQ(
      AddTlsHint(http1, TlsFiles(), "the coordinator", "--tls-ca").message(),
      "x: peer unreachable or gone (Trying to connect an http1.x "
      "server) (an HTTP/1 server answers there, not lockstep's gRPC: a "
      "dashboard's --http port, or another web server?)");
  const absl::Status dns = absl::UnavailableError(
      "x: peer unreachable or gone (DNS resolution failed for nohost:7070)");
  EXPECT_EQ(AddTlsHint(dns, TlsFiles(), "the coordinator", "--tls-ca"), dns);
  // A peer that went silent (paused, gone) is no TLS matter either.
  const absl::Status silent = absl::UnavailableError(
      "x: peer unreachable or gone (keepalive watchdog timeout)");
  EXPECT_EQ(AddTlsHint(silent, TlsFiles(), "the coordinator", "--tls-ca"),
            silent);
  // TLS here, plaintext there: OpenSSL's "wrong version number" says so.
  const absl::Status plain = absl::UnavailableError(
      "x: peer unreachable or gone (SSL_ERROR_SSL: error:0A00010B:SSL "
      "routines::wrong version number)");
  EXPECT_THAT(AddTlsHint(plain, on, "the coordinator", "--tls-ca").message(),
              HasSubstr("(the coordinator answers without TLS: drop --tls-ca, "
                        "or start it with --tls-cert, --tls-key and "
                        "--tls-ca)"));
}

}  // namespace
}  // namespace lockstep
