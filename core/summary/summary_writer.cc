// TensorBoard event file writer.
#include "core/summary/summary_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/crc32c.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "proto/tensorboard.pb.h"

namespace lockstep {
namespace {

std::atomic<int64_t> file_counter{0};

// Event files tell only a full disk apart (kResourceExhausted); every other
// failure, a missing or read-only folder included, is kInternal.
absl::Status WriteError(const std::string& path, int err) {
  absl::Status s = ErrnoToStatus("writing", path, err);
  if (absl::IsResourceExhausted(s)) return s;
  return absl::InternalError(s.message());
}

double WallTime() {
  return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
}

void PutLe32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

}  // namespace

std::string EncodeEventRecord(const std::string& data) {
  std::string out;
  out.reserve(data.size() + 16);
  const uint64_t n = data.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(n >> (8 * i)));
  PutLe32(&out, MaskCrc32c(Crc32c(out.data(), 8)));
  out += data;
  PutLe32(&out, MaskCrc32c(Crc32c(data.data(), data.size())));
  return out;
}

absl::StatusOr<std::unique_ptr<SummaryWriter>> SummaryWriter::Open(
    const std::string& dir) {
  RETURN_IF_ERROR(MakeDirs(dir));
  char host[256] = "localhost";
  if (gethostname(host, sizeof(host) - 1) != 0) strcpy(host, "localhost");
  host[sizeof(host) - 1] = '\0';
  const std::string path =
      JoinPath(dir, absl::StrCat("events.out.tfevents.",
                                 absl::ToUnixSeconds(absl::Now()), ".", host,
                                 ".", getpid(), ".", file_counter++));
  int fd = open(path.c_str(),
                O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return WriteError(path, errno);
  std::unique_ptr<SummaryWriter> w(new SummaryWriter(path, fd));
  tensorboard::Event event;
  event.set_wall_time(WallTime());
  event.set_step(0);
  event.set_file_version("brain.Event:2");
  RETURN_IF_ERROR(w->WriteRecord(event.SerializeAsString()));
  return w;
}

SummaryWriter::~SummaryWriter() {
  if (fd_ >= 0) {
    fsync(fd_);
    close(fd_);
  }
}

absl::Status SummaryWriter::WriteRecord(const std::string& data) {
  const std::string record = EncodeEventRecord(data);
  std::lock_guard<std::mutex> lock(mu_);
  // One write per record (O_APPEND): readers never see half a record unless
  // the disk fills.
  return WriteAll(fd_, record.data(), record.size(),
                  [this](int err) { return WriteError(path_, err); });
}

absl::Status SummaryWriter::AddScalar(const std::string& tag, int64_t step,
                                      double value) {
  return AddScalars(step, {{tag, value}});
}

absl::Status SummaryWriter::AddScalars(
    int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  tensorboard::Event event;
  event.set_wall_time(WallTime());
  event.set_step(step);
  tensorboard::Summary* summary = event.mutable_summary();
  for (const auto& [tag, value] : values) {
    tensorboard::Summary::Value* v = summary->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
  }
  return WriteRecord(event.SerializeAsString());
}

absl::Status SummaryWriter::Flush() {
  std::lock_guard<std::mutex> lock(mu_);
  if (fsync(fd_) != 0) return WriteError(path_, errno);
  return absl::OkStatus();
}

}  // namespace lockstep
