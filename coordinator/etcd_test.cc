// The etcd client, the leader election and the etcd journal store against
// a real one-member etcd started by the test (tests/etcd_server.h).
#include <signal.h>

#include <chrono>
#include <memory>
#include <thread>

#include "coordinator/etcd_client.h"
#include "coordinator/etcd_journal_store.h"
#include "coordinator/leader_lease.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/etcd_server.h"
#include "tests/subprocess.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class EtcdTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::EtcdMissing().empty()) return;
    etcd_ = new testing::EtcdCluster(1, testing::NewTempDir("etcd"));
  }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
  }
  void SetUp() override {
    const std::string missing = testing::EtcdMissing();
    if (!missing.empty()) GTEST_SKIP() << missing;
    ASSERT_TRUE(etcd_->ok()) << etcd_->error();
    // Each test under its own prefix.
    prefix_ = std::string("/t/") +
              ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  std::unique_ptr<EtcdClient> Client(const std::string& endpoints) {
    absl::StatusOr<std::vector<std::string>> list =
        ParseEtcdEndpoints(endpoints, false, "--etcd");
    EXPECT_TRUE(list.ok()) << list.status();
    EtcdOptions options;
    options.endpoints = *list;
    options.call_timeout = absl::Seconds(1);
    return *EtcdClient::Connect(options);
  }
  static double Seconds(std::chrono::steady_clock::time_point since) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         since)
        .count();
  }
  static testing::EtcdCluster* etcd_;
  std::string prefix_;
};
testing::EtcdCluster* EtcdTest::etcd_ = nullptr;

TEST(EtcdEndpointsTest, ParsesAndNamesWhatIsWrong) {
  absl::StatusOr<std::vector<std::string>> ok =
      ParseEtcdEndpoints("http://a:1, b:2,https://c:3", true, "--etcd");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*ok,
            (std::vector<std::string>{"http://a:1", "b:2", "https://c:3"}));
  EXPECT_EQ(
      ParseEtcdEndpoints("http://a:1,,b:2", false, "--etcd").status().message(),
      "--etcd \"http://a:1,,b:2\": an empty endpoint (give "
      "http://host:port, comma-separated)");
  EXPECT_THAT(
      std::string(
          ParseEtcdEndpoints("unix://x", false, "--etcd").status().message()),
      HasSubstr("--etcd \"unix://x\": not an etcd endpoint"));
  EXPECT_THAT(std::string(ParseEtcdEndpoints("https://a:1", false, "--etcd")
                              .status()
                              .message()),
              HasSubstr("is https:// but --etcd-ca is not given"));
}

TEST_F(EtcdTest, ReadsWritesAndComparesAndFailsOverToTheNextEndpoint) {
  // The first endpoint has nothing listening: every call goes on to the
  // second, which is then the one used.
  const std::string dead =
      "http://127.0.0.1:" + std::to_string(testing::FreePort());
  auto etcd = Client(dead + "," + etcd_->Endpoint(0));
  absl::StatusOr<int64_t> rev = etcd->Put(prefix_ + "/a", "1");
  ASSERT_TRUE(rev.ok()) << rev.status();
  EXPECT_GT(*rev, 0);
  EXPECT_EQ(etcd->endpoint(), etcd_->Endpoint(0));
  ASSERT_TRUE(etcd->Put(prefix_ + "/b", "2").ok());
  ASSERT_TRUE(etcd->Put(prefix_ + "c", "outside").ok());
  auto a = etcd->Get(prefix_ + "/a");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(a->has_value());
  EXPECT_EQ((*a)->value(), "1");
  EXPECT_EQ((*a)->create_revision(), *rev);
  auto none = etcd->Get(prefix_ + "/none");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto all = etcd->GetPrefix(prefix_ + "/");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1].value(), "2");

  // A compare that fails runs the failure branch only.
  etcdserverpb::TxnRequest txn;
  auto* cmp = txn.add_compare();
  cmp->set_key(prefix_ + "/a");
  cmp->set_target(etcdserverpb::Compare::CREATE);
  cmp->set_create_revision(*rev + 1000);
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(prefix_ + "/a");
  put->set_value("changed");
  auto r = etcd->Txn(txn);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->succeeded());
  EXPECT_EQ((*etcd->Get(prefix_ + "/a"))->value(), "1");

  // No endpoint answers: UNAVAILABLE naming each.
  auto nobody = Client(dead);
  absl::Status down = nobody->Put("x", "y").status();
  EXPECT_EQ(down.code(), absl::StatusCode::kUnavailable) << down;
  EXPECT_THAT(std::string(down.message()),
              StartsWith("etcd Put: no etcd endpoint answered (" + dead));
}

TEST_F(EtcdTest, AKeyUnderALeaseGoesWithTheLease) {
  auto etcd = Client(etcd_->Endpoints());
  auto lease = etcd->GrantLease(2);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->ttl(), 2);
  ASSERT_TRUE(etcd->Put(prefix_ + "/k", "v", lease->id()).ok());
  std::chrono::steady_clock::time_point sent;
  auto ttl = etcd->KeepAlive(lease->id(), absl::Seconds(1), &sent);
  ASSERT_TRUE(ttl.ok()) << ttl.status();
  EXPECT_EQ(*ttl, 2);
  ASSERT_TRUE(etcd->RevokeLease(lease->id()).ok());
  EXPECT_FALSE((*etcd->Get(prefix_ + "/k")).has_value());
  auto gone = etcd->KeepAlive(lease->id(), absl::Seconds(1), &sent);
  ASSERT_TRUE(gone.ok()) << gone.status();
  EXPECT_LE(*gone, 0);
}

LeaderLeaseOptions LeaseOptions(const std::string& prefix) {
  LeaderLeaseOptions o;
  o.key = prefix + "/leader";
  o.poll_every = absl::Milliseconds(50);
  return o;
}

TEST_F(EtcdTest, OneLeadsTheOtherStandsByAndLeadsWhenTheFirstResigns) {
  auto etcd = Client(etcd_->Endpoints());
  auto first = std::make_unique<LeaderLease>(etcd.get(), LeaseOptions(prefix_));
  std::atomic<bool> stop{false};
  absl::StatusOr<int64_t> term = first->Campaign("10.0.0.1:7070", stop);
  ASSERT_TRUE(term.ok()) << term.status();
  EXPECT_TRUE(first->Held());
  EXPECT_EQ(first->NotLeading(), "");
  auto key = etcd->Get(prefix_ + "/leader");
  ASSERT_TRUE(key.ok() && key->has_value());
  EXPECT_EQ((*key)->value(), "10.0.0.1:7070");
  EXPECT_EQ((*key)->create_revision(), *term);

  LeaderLease second(etcd.get(), LeaseOptions(prefix_));
  absl::StatusOr<int64_t> second_term;
  std::thread campaign(
      [&] { second_term = second.Campaign("10.0.0.2:7070", stop); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_FALSE(second.Held());
  EXPECT_EQ(second.NotLeading(),
            "a standby; the leader is 10.0.0.1:7070 (term " +
                std::to_string(*term) + ")");
  // The first one leaves (its destructor revokes its lease): the second
  // leads within a poll, not after the TTL.
  const auto resigned = std::chrono::steady_clock::now();
  first.reset();
  campaign.join();
  ASSERT_TRUE(second_term.ok()) << second_term.status();
  EXPECT_LT(Seconds(resigned), testing::Scaled(1.0));
  EXPECT_GT(*second_term, *term);
  EXPECT_TRUE(second.Held());
}

TEST_F(EtcdTest, AStoppedCampaignReturnsCancelled) {
  auto etcd = Client(etcd_->Endpoints());
  LeaderLease first(etcd.get(), LeaseOptions(prefix_));
  std::atomic<bool> stop{false};
  ASSERT_TRUE(first.Campaign("a:1", stop).ok());
  LeaderLease second(etcd.get(), LeaseOptions(prefix_));
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop = true;
  });
  absl::StatusOr<int64_t> r = second.Campaign("b:1", stop);
  stopper.join();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled);
}

lockstep::v1::Journal SomeJournal(int jobs) {
  lockstep::v1::Journal j;
  j.set_sequence(7);
  j.set_next_worker(3);
  auto* w = j.add_workers();
  w->set_id("w1");
  w->set_rank(0);
  for (int i = 0; i < jobs; ++i) {
    auto* job = j.add_jobs();
    job->set_job_json("{\"name\": \"job" + std::to_string(i) + "\"}");
    job->mutable_status()->set_name("job" + std::to_string(i));
    job->add_events("submitted");
  }
  return j;
}

TEST_F(EtcdTest, TheJournalRoundTripsAndAWriteSendsOnlyWhatChanged) {
  auto etcd = Client(etcd_->Endpoints());
  LeaderLease lease(etcd.get(), LeaseOptions(prefix_));
  std::atomic<bool> stop{false};
  ASSERT_TRUE(lease.Campaign("a:1", stop).ok());
  EtcdJournalStore store(etcd.get(), &lease, prefix_);
  EXPECT_EQ(store.Where(),
            "etcd " + etcd_->Endpoint(0) + " " + prefix_ + "/journal/");
  auto empty = store.Read();
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_FALSE(empty->has_value());

  lockstep::v1::Journal j = SomeJournal(3);
  ASSERT_TRUE(store.Write(j).ok());
  auto job1 = etcd->Get(prefix_ + "/journal/job/000001");
  ASSERT_TRUE(job1.ok() && job1->has_value());
  const int64_t job1_rev = (*job1)->mod_revision();
  // Only job 2 and the membership change.
  j.set_sequence(8);
  j.mutable_jobs(2)->add_events("RUNNING generation 1");
  ASSERT_TRUE(store.Write(j).ok());
  EXPECT_EQ((*etcd->Get(prefix_ + "/journal/job/000001"))->mod_revision(),
            job1_rev);
  // A job dropped from the journal is deleted from etcd.
  j.mutable_jobs()->RemoveLast();
  ASSERT_TRUE(store.Write(j).ok());
  EXPECT_FALSE((*etcd->Get(prefix_ + "/journal/job/000002")).has_value());

  // Another store (a coordinator taking over) reads the same journal.
  EtcdJournalStore other(etcd.get(), &lease, prefix_);
  auto read = other.Read();
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ((*read)->SerializeAsString(), j.SerializeAsString());
  EXPECT_EQ(store.refused_writes(), 0);
}

TEST_F(EtcdTest, AJournalOfManyJobsIsWrittenInSeveralTransactions) {
  auto etcd = Client(etcd_->Endpoints());
  LeaderLease lease(etcd.get(), LeaseOptions(prefix_));
  std::atomic<bool> stop{false};
  ASSERT_TRUE(lease.Campaign("a:1", stop).ok());
  EtcdJournalStore store(etcd.get(), &lease, prefix_);
  lockstep::v1::Journal j =
      SomeJournal(2 * EtcdJournalStore::kMaxOpsPerTxn + 5);
  absl::Status s = store.Write(j);
  ASSERT_TRUE(s.ok()) << s;
  EtcdJournalStore other(etcd.get(), &lease, prefix_);
  auto read = other.Read();
  ASSERT_TRUE(read.ok() && read->has_value()) << read.status();
  EXPECT_EQ((*read)->SerializeAsString(), j.SerializeAsString());
}

TEST_F(EtcdTest, AWriteAfterAnotherCoordinatorLeadsIsRefusedByEtcd) {
  auto etcd = Client(etcd_->Endpoints());
  LeaderLease old_leader(etcd.get(), LeaseOptions(prefix_));
  std::atomic<bool> stop{false};
  absl::StatusOr<int64_t> old_term = old_leader.Campaign("old:1", stop);
  ASSERT_TRUE(old_term.ok());
  EtcdJournalStore stale(etcd.get(), &old_leader, prefix_);
  lockstep::v1::Journal j = SomeJournal(1);
  ASSERT_TRUE(stale.Write(j).ok());

  // The old leader's key goes (as when its lease expires while it is
  // paused; its own clock has not noticed yet) and another one leads.
  ASSERT_TRUE(etcd->Txn([&] {
                    etcdserverpb::TxnRequest t;
                    t.add_success()->mutable_request_delete_range()->set_key(
                        prefix_ + "/leader");
                    return t;
                  }())
                  .ok());
  LeaderLease new_leader(etcd.get(), LeaseOptions(prefix_));
  absl::StatusOr<int64_t> new_term = new_leader.Campaign("new:1", stop);
  ASSERT_TRUE(new_term.ok());
  EXPECT_TRUE(old_leader.Held());  // it still believes it leads

  j.set_sequence(99);
  absl::Status refused = stale.Write(j);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.message(),
            "journal write refused: etcd refused this coordinator's write: "
            "the leader key " +
                prefix_ + "/leader names new:1 (term " +
                std::to_string(*new_term) + "), not this coordinator's term " +
                std::to_string(*old_term) + "; it no longer leads");
  EXPECT_EQ(stale.refused_writes(), 1);
  EXPECT_THAT(stale.NotLeading(), HasSubstr("it no longer leads"));
  // Once refused, it does not try again.
  EXPECT_EQ(stale.Write(j).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(stale.refused_writes(), 2);
  // Nothing of it landed: the journal is the one written before.
  EtcdJournalStore fresh(etcd.get(), &new_leader, prefix_);
  auto read = fresh.Read();
  ASSERT_TRUE(read.ok() && read->has_value());
  EXPECT_EQ((*read)->sequence(), 7);
  // The new leader writes.
  EXPECT_TRUE(fresh.Write(j).ok());
}

TEST_F(EtcdTest, AStandbyDoesNotWrite) {
  auto etcd = Client(etcd_->Endpoints());
  LeaderLease leader(etcd.get(), LeaseOptions(prefix_));
  std::atomic<bool> stop{false};
  ASSERT_TRUE(leader.Campaign("lead:1", stop).ok());
  LeaderLease standby(etcd.get(), LeaseOptions(prefix_));
  EtcdJournalStore store(etcd.get(), &standby, prefix_);
  absl::Status s = store.Write(SomeJournal(1));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              StartsWith("journal write refused: a standby (no leader yet)"));
  EXPECT_EQ(store.refused_writes(), 1);
  EXPECT_FALSE((*etcd->Get(prefix_ + "/journal/membership")).has_value());
}

TEST_F(EtcdTest, ADamagedKeyIsDataLossNamingIt) {
  auto etcd = Client(etcd_->Endpoints());
  LeaderLease lease(etcd.get(), LeaseOptions(prefix_));
  std::atomic<bool> stop{false};
  ASSERT_TRUE(lease.Campaign("a:1", stop).ok());
  EtcdJournalStore store(etcd.get(), &lease, prefix_);
  ASSERT_TRUE(store.Write(SomeJournal(2)).ok());
  ASSERT_TRUE(etcd->Put(prefix_ + "/journal/job/000001", "\xff\xff").ok());
  absl::Status s = store.Read().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(
      std::string(s.message()),
      HasSubstr("(key " + prefix_ + "/journal/job/000001 is not a job)"));
  ASSERT_TRUE(etcd->Put(prefix_ + "/journal/job/000001", "").ok());
  ASSERT_TRUE(etcd->Put(prefix_ + "/journal/stray", "x").ok());
  EXPECT_THAT(std::string(store.Read().status().message()),
              HasSubstr("unknown key " + prefix_ + "/journal/stray"));
}

// Three etcd members, the one the client was using paused (it accepts
// connections and answers nothing) and then killed: the client goes on
// with the others, the lease stays held throughout, the election and the
// fenced journal still work, and a standby takes over when the leader
// resigns.
TEST(EtcdClusterTest, ThreeMembersOnePausedThenKilled) {
  const std::string missing = testing::EtcdMissing();
  if (!missing.empty()) GTEST_SKIP() << missing;
  testing::EtcdCluster etcd(3, testing::NewTempDir("etcd3"));
  ASSERT_TRUE(etcd.ok()) << etcd.error();
  absl::StatusOr<std::vector<std::string>> endpoints =
      ParseEtcdEndpoints(etcd.Endpoints(), false, "--etcd");
  ASSERT_TRUE(endpoints.ok());
  EtcdOptions options;
  options.endpoints = *endpoints;
  options.call_timeout = absl::Seconds(1);
  std::unique_ptr<EtcdClient> client = *EtcdClient::Connect(options);
  LeaderLeaseOptions lo;
  lo.key = "/three/leader";
  lo.poll_every = absl::Milliseconds(50);
  auto first = std::make_unique<LeaderLease>(client.get(), lo);
  std::atomic<bool> stop{false};
  ASSERT_TRUE(first->Campaign("first:1", stop).ok());
  EtcdJournalStore store(client.get(), first.get(), "/three");
  lockstep::v1::Journal j = SomeJournal(2);
  ASSERT_TRUE(store.Write(j).ok());
  EXPECT_EQ(client->endpoint(), etcd.Endpoint(0));

  // Paused: each call to it waits out its deadline, then goes on. The
  // keep-alives (0.5 s a try) keep the lease held all along.
  etcd.member(0).Signal(SIGSTOP);
  j.set_sequence(8);
  absl::Status paused = store.Write(j);
  ASSERT_TRUE(paused.ok()) << paused;
  EXPECT_NE(client->endpoint(), etcd.Endpoint(0));
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(first->Held()) << i << ": " << first->NotLeading();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  etcd.Kill(0);
  // Two of three keep the quorum.
  j.set_sequence(9);
  absl::Status s = store.Write(j);
  ASSERT_TRUE(s.ok()) << s;
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_TRUE(first->Held()) << first->NotLeading();

  LeaderLease second(client.get(), lo);
  absl::StatusOr<int64_t> second_term;
  std::thread campaign(
      [&] { second_term = second.Campaign("second:1", stop); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  first.reset();  // resigns
  campaign.join();
  ASSERT_TRUE(second_term.ok()) << second_term.status();
  EtcdJournalStore taken(client.get(), &second, "/three");
  auto read = taken.Read();
  ASSERT_TRUE(read.ok() && read->has_value()) << read.status();
  EXPECT_EQ((*read)->sequence(), 9);
  j.set_sequence(10);
  EXPECT_TRUE(taken.Write(j).ok());
}

}  // namespace
}  // namespace lockstep
