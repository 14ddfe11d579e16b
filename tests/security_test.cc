// TLS and the bearer token with real processes on 127.0.0.1: a TLS
// coordinator with a token and two TLS workers train a job; job commands
// without the token, or without TLS, are refused with messages that say
// what to pass; workers without an accepted certificate never join; a
// worker's collective port admits only certificates of the cluster's CA;
// partial or unusable security flags are usage errors.
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/cluster.grpc.pb.h"
#include "proto/collective.grpc.pb.h"
#include "rpc/rpc_util.h"
#include "rpc/tls.h"
#include "tests/local_cluster.h"
#include "tests/subprocess.h"
#include "tests/test_certs.h"
#include "tests/test_jobs.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
using testing::LocalCluster;
using testing::NewTempDir;
using ::testing::Not;
using testing::Runfile;
using testing::RunProcess;
using testing::RunResult;
using testing::Subprocess;
using testing::TestCerts;
using testing::WriteStringToFile;

constexpr double kTimeout = 120;
constexpr char kToken[] = "correct-horse-battery-staple";

std::string Binary() { return Runfile("client/lockstep"); }

TlsFiles LoadOrDie(const TlsPaths& paths, TlsRole role) {
  absl::StatusOr<TlsFiles> tls = LoadTlsFiles(paths, role);
  EXPECT_TRUE(tls.ok()) << tls.status();
  return tls.ok() ? *tls : TlsFiles();
}

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("LOCKSTEP_TOKEN");  // the children inherit the environment
    dir_ = NewTempDir("security");
    std::string why;
    ASSERT_TRUE(testing::MakeTestCerts(dir_, &certs_, &why)) << why;
    token_file_ = dir_ + "/token";
    WriteStringToFile(token_file_, std::string("  ") + kToken + "\n\n");
    cluster_ = std::make_unique<LocalCluster>(
        dir_, std::vector<std::string>{"--tls-cert", certs_.coordinator_cert,
                                       "--tls-key", certs_.coordinator_key,
                                       "--tls-ca", certs_.ca, "--token-file",
                                       token_file_});
    ASSERT_TRUE(cluster_->ok()) << cluster_->error();
  }

  std::vector<std::string> WorkerTls() const {
    return {"--tls-cert",      certs_.worker_cert, "--tls-key",
            certs_.worker_key, "--tls-ca",         certs_.ca};
  }

  void StartGoodWorkers(int n) {
    std::string why;
    ASSERT_TRUE(cluster_->StartWorkers(n, 1, 1, &why, WorkerTls())) << why;
  }

  // `lockstep ARGS --coordinator ADDRESS` with the CA and the token.
  RunResult Client(std::vector<std::string> args, double timeout = kTimeout) {
    args.insert(args.end(),
                {"--tls-ca", certs_.ca, "--token-file", token_file_});
    return cluster_->Client(std::move(args), timeout);
  }

  // A worker process that is expected to be refused.
  std::unique_ptr<Subprocess> StartWorker(std::vector<std::string> extra) {
    std::vector<std::string> argv = {Binary(),        "worker",
                                     "--coordinator", cluster_->address(),
                                     "--threads",     "1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return std::make_unique<Subprocess>(argv, dir_);
  }

  std::string dir_, token_file_;
  TestCerts certs_;
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(SecurityTest, TlsClusterWithTokenTrainsAJob) {
  StartGoodWorkers(2);
  EXPECT_THAT(cluster_->coordinator().Stdout(),
              HasSubstr("TLS (workers need a certificate signed by --tls-ca), "
                        "bearer token required for jobs"));
  EXPECT_THAT(cluster_->coordinator().Stdout(), Not(HasSubstr("warning")));
  EXPECT_THAT(cluster_->worker(0).Stdout(), HasSubstr("replicas, TLS)"));

  const std::string job = dir_ + "/job.json";
  WriteStringToFile(job, testing::TinyJob(nlohmann::json::parse(R"({
    "cluster": {"workers": 2, "replicas_per_worker": 1, "bucket_kib": 1}})"))
                             .dump(2));
  // The ring between the two workers runs over TLS too.
  RunResult r = Client({"submit", job, "--wait"});
  ASSERT_TRUE(r.exit.exited);
  ASSERT_EQ(r.exit.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("job tiny SUCCEEDED"));

  RunResult s = Client({"status", "tiny"}, 30);
  ASSERT_EQ(s.exit.exit_code, 0) << s.out << s.err;
  EXPECT_THAT(s.out, HasSubstr("job tiny: SUCCEEDED"));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      s.out, m,
      std::regex(R"(test accuracy (\d\.\d{4})  test loss \S+  fingerprint )"
                 R"((\S+))")))
      << s.out;
  EXPECT_GT(std::stod(m[1]), 0.5) << s.out;
  nlohmann::json result = nlohmann::json::parse(
      testing::ReadFileOrEmpty(cluster_->storage() + "/jobs/tiny/result.json"),
      nullptr, false);
  ASSERT_TRUE(result.is_object());
  EXPECT_EQ(m[2].str(), result["fingerprint"].get<std::string>());
}

TEST_F(SecurityTest, JobCommandsNeedTheBearerToken) {
  // No token at all.
  RunResult none = cluster_->Client({"list", "--tls-ca", certs_.ca}, 30);
  ASSERT_TRUE(none.exit.exited);
  EXPECT_EQ(none.exit.exit_code, 1) << none.out << none.err;
  EXPECT_THAT(none.err, HasSubstr("this coordinator needs a bearer token: "
                                  "pass --token-file or set LOCKSTEP_TOKEN"));
  // A submit without it creates nothing.
  const std::string job = dir_ + "/job.json";
  WriteStringToFile(job, testing::TinyJob().dump(2));
  RunResult submit =
      cluster_->Client({"submit", job, "--tls-ca", certs_.ca}, 30);
  EXPECT_EQ(submit.exit.exit_code, 1) << submit.out << submit.err;
  EXPECT_THAT(submit.err, HasSubstr("bearer token"));

  // A wrong one.
  const std::string wrong = dir_ + "/wrong-token";
  WriteStringToFile(wrong, "not-the-token\n");
  RunResult bad = cluster_->Client(
      {"list", "--tls-ca", certs_.ca, "--token-file", wrong}, 30);
  EXPECT_EQ(bad.exit.exit_code, 1) << bad.out << bad.err;
  EXPECT_THAT(bad.err, HasSubstr("bearer token refused"));

  // LOCKSTEP_TOKEN stands in for --token-file.
  setenv("LOCKSTEP_TOKEN", kToken, 1);
  RunResult env = cluster_->Client({"list", "--tls-ca", certs_.ca}, 30);
  unsetenv("LOCKSTEP_TOKEN");
  EXPECT_EQ(env.exit.exit_code, 0) << env.out << env.err;
  EXPECT_THAT(env.out, HasSubstr("workers: 0"));
  RunResult list = Client({"list"}, 30);
  EXPECT_EQ(list.exit.exit_code, 0) << list.err;
  EXPECT_THAT(list.out, Not(HasSubstr("tiny")));  // the refused submit

  const std::string log = cluster_->coordinator().Stdout();
  EXPECT_THAT(log, HasSubstr("refused ListJobs from ipv4:127.0.0.1:"));
  EXPECT_THAT(log, HasSubstr(": no bearer token"));
  EXPECT_THAT(log, HasSubstr(": wrong bearer token"));
  EXPECT_THAT(log, Not(HasSubstr(kToken)));
  // Rate-limited: the refused submit from the same host is not logged again.
  EXPECT_THAT(log, Not(HasSubstr("refused Submit")));
}

TEST_F(SecurityTest, ClientsWithoutTheRightTlsAreToldWhatToPass) {
  // Plaintext against TLS: the handshake fails (gRPC says UNAVAILABLE).
  RunResult plain = cluster_->Client({"list", "--token-file", token_file_}, 30);
  ASSERT_TRUE(plain.exit.exited);
  EXPECT_EQ(plain.exit.exit_code, 1) << plain.out << plain.err;
  EXPECT_THAT(plain.err, HasSubstr("lockstep list: error: list from "));
  EXPECT_THAT(plain.err,
              HasSubstr("(if the coordinator uses TLS, pass --tls-ca)"));

  // Trusting another CA: the coordinator's certificate does not verify.
  RunResult rogue = cluster_->Client(
      {"list", "--tls-ca", certs_.rogue_ca, "--token-file", token_file_}, 30);
  EXPECT_EQ(rogue.exit.exit_code, 1) << rogue.out << rogue.err;
  EXPECT_THAT(rogue.err, HasSubstr("is the coordinator using TLS with the "
                                   "same CA as --tls-ca"));
}

TEST_F(SecurityTest, WorkersWithoutAnAcceptedCertificateNeverJoin) {
  StartGoodWorkers(2);
  std::unique_ptr<Subprocess> plain = StartWorker({});
  std::unique_ptr<Subprocess> rogue =
      StartWorker({"--tls-cert", certs_.rogue_cert, "--tls-key",
                   certs_.rogue_key, "--tls-ca", certs_.rogue_ca});
  // Both log why (a failed handshake looks like an unreachable peer to
  // gRPC, so they retry) within a bounded time, and never register.
  ASSERT_TRUE(plain->WaitForOutput("retrying every second", 30))
      << plain->Stdout() << plain->Stderr();
  EXPECT_THAT(plain->Stdout(),
              HasSubstr("(if the coordinator uses TLS, pass --tls-cert, "
                        "--tls-key and --tls-ca)"));
  ASSERT_TRUE(rogue->WaitForOutput("retrying every second", 30))
      << rogue->Stdout() << rogue->Stderr();
  EXPECT_THAT(rogue->Stdout(),
              HasSubstr("is the coordinator using TLS with the same CA as "
                        "--tls-ca"));

  // A caller with the right CA but no certificate gets through the
  // handshake (job clients may) and is refused per call.
  auto stub = lockstep::v1::Coordinator::NewStub(MakeChannel(
      cluster_->address(), LoadOrDie({"", "", certs_.ca}, TlsRole::kClient)));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  lockstep::v1::RegisterRequest req;
  req.set_protocol_version(kProtocolVersion);
  req.set_collective_address("127.0.0.1:1");
  req.set_replicas(1);
  lockstep::v1::RegisterResponse resp;
  grpc::Status s = stub->Register(&context, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(s.error_message(),
            "worker calls need a client certificate signed by the "
            "coordinator's --tls-ca");

  sleep(2);  // a few more retries of the refused workers
  EXPECT_FALSE(plain->Wait(0).exited);  // still retrying, still outside
  RunResult list = Client({"list"}, 30);
  ASSERT_EQ(list.exit.exit_code, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr("workers: 2\n")) << list.out;
  EXPECT_THAT(list.out, HasSubstr(" w1 "));
  EXPECT_THAT(list.out, HasSubstr(" w2 "));
  EXPECT_THAT(list.out, Not(HasSubstr(" w3 ")));
  EXPECT_THAT(cluster_->coordinator().Stdout(),
              HasSubstr("refused Register from ipv4:127.0.0.1:"));
}

TEST_F(SecurityTest, CollectivePortAdmitsOnlyTheClusterCa) {
  StartGoodWorkers(1);
  std::smatch m;
  const std::string log = cluster_->worker(0).Stdout();
  ASSERT_TRUE(std::regex_search(
      log, m, std::regex(R"(collective service (127\.0\.0\.1:\d+))")))
      << log;
  const std::string address = m[1];
  // An empty Push stream: past TLS it reaches the service, which refuses a
  // stream without a message (INVALID_ARGUMENT); a refused handshake never
  // gets there (UNAVAILABLE).
  auto push = [&](const TlsFiles& tls) {
    auto stub = lockstep::v1::Collective::NewStub(MakeChannel(address, tls));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    lockstep::v1::PushAck ack;
    auto writer = stub->Push(&context, &ack);
    writer->WritesDone();
    return writer->Finish();
  };
  grpc::Status peer = push(LoadOrDie(
      {certs_.worker_cert, certs_.worker_key, certs_.ca}, TlsRole::kDaemon));
  EXPECT_EQ(peer.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << peer.error_message();
  EXPECT_THAT(peer.error_message(),
              HasSubstr("refused a stream without a readable message"));
  // A rogue certificate (trusting the cluster CA so the client side
  // accepts the worker): the worker refuses the handshake.
  grpc::Status rogue = push(LoadOrDie(
      {certs_.rogue_cert, certs_.rogue_key, certs_.ca}, TlsRole::kClient));
  EXPECT_EQ(rogue.error_code(), grpc::StatusCode::UNAVAILABLE)
      << rogue.error_message();
  grpc::Status no_cert = push(LoadOrDie({"", "", certs_.ca}, TlsRole::kClient));
  EXPECT_EQ(no_cert.error_code(), grpc::StatusCode::UNAVAILABLE)
      << no_cert.error_message();
  grpc::Status plain = push(TlsFiles());
  EXPECT_EQ(plain.error_code(), grpc::StatusCode::UNAVAILABLE)
      << plain.error_message();

  // The training state a worker keeps after a failed generation is served
  // on the same port (WorkerState): to a cluster peer only.
  auto fetch = [&](const TlsFiles& tls) {
    auto stub = lockstep::v1::WorkerState::NewStub(MakeChannel(address, tls));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    lockstep::v1::FetchStateRequest req;
    req.set_job("tiny");
    req.set_step(1);
    auto reader = stub->FetchState(&context, req);
    lockstep::v1::CheckpointSlice slice;
    while (reader->Read(&slice)) {
    }
    return reader->Finish();
  };
  grpc::Status state = fetch(LoadOrDie(
      {certs_.worker_cert, certs_.worker_key, certs_.ca}, TlsRole::kDaemon));
  EXPECT_EQ(state.error_code(), grpc::StatusCode::NOT_FOUND)
      << state.error_message();
  EXPECT_THAT(state.error_message(),
              HasSubstr("keeps no training state of job \"tiny\" at step 1"));
  grpc::Status rogue_state = fetch(LoadOrDie(
      {certs_.rogue_cert, certs_.rogue_key, certs_.ca}, TlsRole::kClient));
  EXPECT_EQ(rogue_state.error_code(), grpc::StatusCode::UNAVAILABLE)
      << rogue_state.error_message();
  EXPECT_EQ(fetch(TlsFiles()).error_code(), grpc::StatusCode::UNAVAILABLE);
}

// Runs `lockstep ARGS` that must fail at once with a usage error.
void ExpectUsageError(const std::vector<std::string>& args,
                      const std::string& message) {
  const std::string dir = NewTempDir("flags");
  std::vector<std::string> argv = {Binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  RunResult r = RunProcess(argv, dir, 30);
  ASSERT_TRUE(r.exit.exited) << args[0];
  EXPECT_EQ(r.exit.exit_code, 2) << args[0] << ": " << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr(message)) << args[0];
}

TEST(SecurityFlagsTest, PartialOrUnusableFlagsAreUsageErrors) {
  const std::string dir = NewTempDir("flagfiles");
  TestCerts certs;
  std::string why;
  ASSERT_TRUE(testing::MakeTestCerts(dir, &certs, &why)) << why;
  const std::string empty = dir + "/empty-token";
  WriteStringToFile(empty, " \n");

  ExpectUsageError({"coordinator", "--listen", "127.0.0.1:0", "--tls-cert",
                    certs.coordinator_cert, "--tls-ca", certs.ca},
                   "--tls-cert is given but --tls-key is not");
  ExpectUsageError(
      {"worker", "--coordinator", "127.0.0.1:1", "--tls-ca", certs.ca},
      "--tls-ca is given but --tls-cert and --tls-key are not");
  ExpectUsageError({"list", "--coordinator", "127.0.0.1:1", "--tls-cert",
                    certs.worker_cert, "--tls-key", certs.worker_key},
                   "--tls-cert is given but --tls-ca is not");
  ExpectUsageError({"list", "--coordinator", "127.0.0.1:1", "--tls-ca",
                    dir + "/missing.pem"},
                   "--tls-ca: cannot read \"" + dir + "/missing.pem\"");
  ExpectUsageError({"coordinator", "--listen", "127.0.0.1:0", "--storage",
                    dir + "/storage", "--token-file", empty},
                   "--token-file \"" + empty + "\": the file holds no token");
  ExpectUsageError({"status", "--coordinator", "127.0.0.1:1", "--token-file",
                    dir + "/missing-token"},
                   "--token-file: cannot read");

  for (const char* verb : {"coordinator", "worker"}) {
    RunResult help = RunProcess({Binary(), verb, "--help"}, dir, 30);
    EXPECT_EQ(help.exit.exit_code, 0);
    EXPECT_THAT(help.out, HasSubstr("--tls-cert F --tls-key F --tls-ca F"));
  }
  for (const char* verb : {"submit", "status", "watch", "list", "cancel"}) {
    RunResult help = RunProcess({Binary(), verb, "--help"}, dir, 30);
    EXPECT_EQ(help.exit.exit_code, 0) << verb;
    EXPECT_THAT(help.out, HasSubstr("--tls-ca F")) << verb;
    EXPECT_THAT(help.out, HasSubstr("--token-file F")) << verb;
  }
}

TEST(SecurityFlagsTest, ListeningBeyondLoopbackWithoutTlsWarns) {
  const std::string dir = NewTempDir("warn");
  Subprocess coordinator({Binary(), "coordinator", "--listen", "0.0.0.0:0",
                          "--storage", dir + "/storage"},
                         dir);
  ASSERT_TRUE(coordinator.WaitForOutput("without TLS", 30))
      << coordinator.Stdout() << coordinator.Stderr();
  EXPECT_THAT(coordinator.Stdout(),
              HasSubstr("warning: listening on 0.0.0.0:"));
  EXPECT_THAT(coordinator.Stdout(),
              HasSubstr(" without TLS: anyone who can reach it can submit "
                        "jobs and join the ring"));
}

}  // namespace
}  // namespace lockstep
