// The ranks a collective test runs on (see coll_team.h).
#include "coll_team.h"
#include <string.h>
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include "test_util.h"

namespace mkccl {
namespace test {
namespace {

std::mutex g_mu;
std::map<TeamKind, std::unique_ptr<Team>>& teams() {
  static std::map<TeamKind, std::unique_ptr<Team>> t;
  return t;
}

mkcclConfig_t configOf(TeamKind kind) {
  mkcclConfig_t cfg = MKCCL_CONFIG_INITIALIZER;
  cfg.timeoutMs = 30000;  // a protocol bug fails the test in 30 s instead of hanging it
  if (kind == TeamKind::kSmallWs) cfg.workspaceBytes = 4ll << 20;
  if (kind == TeamKind::kFewCtas) cfg.maxCtas = 2;
  if (kind == TeamKind::kOneCta) cfg.maxCtas = 1;
  return cfg;
}

std::string resultText(mkcclResult_t r) {
  return std::string(mkcclGetErrorString(r)) + ": " + mkcclGetLastError(nullptr);
}

}  // namespace

Team* Team::get(TeamKind kind, std::string* why) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = teams().find(kind);
  if (it != teams().end()) return it->second.get();
  const launch::World& w = world();
  const int ngpu = gpuCount();
  if (ngpu == 0) {
    *why = "no GPU";
    return nullptr;
  }
  std::unique_ptr<Team> t(new Team);
  mkcclConfig_t cfg = configOf(kind);
  if (kind == TeamKind::kSingle) {
    Rank r;
    r.device = w.localRank % ngpu;
    cudaSetDevice(r.device);
    const mkcclResult_t res = mkcclCommInitRankConfig(&r.comm, 1, [] {
      mkcclUniqueId id;
      memset(&id, 0, sizeof(id));
      mkcclGetUniqueId(&id);
      return id;
    }(), 0, &cfg);
    if (res != mkcclSuccess) {
      *why = "1-rank communicator: " + resultText(res);
      return nullptr;
    }
    t->ranks_.push_back(r);
    t->nranks_ = 1;
  } else if (w.nranks > 1) {
    Rank r;
    r.comm = worldComm(&cfg);  // sets the device (localRank % GPUs)
    if (!r.comm) {
      *why = "world communicator failed";
      return nullptr;
    }
    cudaGetDevice(&r.device);
    r.rank = w.rank;
    r.nranks = w.nranks;
    t->ranks_.push_back(r);
    t->nranks_ = w.nranks;
    t->multiProcess_ = true;
  } else {
    const int n = std::min(ngpu, 8);
    std::vector<mkcclComm_t> comms(n, nullptr);
    if (kind == TeamKind::kDefault) {
      const mkcclResult_t res = mkcclCommInitAll(comms.data(), n, nullptr);
      if (res != mkcclSuccess) {
        *why = "mkcclCommInitAll: " + resultText(res);
        return nullptr;
      }
    } else {
      mkcclUniqueId id;
      mkcclResult_t res = mkcclGetUniqueId(&id);
      std::vector<mkcclResult_t> results(n, res);
      std::vector<std::thread> th;
      for (int i = 0; i < n && res == mkcclSuccess; ++i)
        th.emplace_back([&, i] {
          cudaSetDevice(i);
          mkcclConfig_t c = cfg;
          results[i] = mkcclCommInitRankConfig(&comms[i], n, id, i, &c);
        });
      for (auto& x : th) x.join();
      for (int i = 0; i < n; ++i)
        if (results[i] != mkcclSuccess) {
          *why = "mkcclCommInitRankConfig rank " + std::to_string(i) + ": " + resultText(results[i]);
          return nullptr;
        }
    }
    for (int i = 0; i < n; ++i) {
      Rank r;
      r.rank = i;
      r.nranks = n;
      r.device = i;
      r.comm = comms[i];
      t->ranks_.push_back(r);
    }
    t->nranks_ = n;
  }
  for (Rank& r : t->ranks_) {
    cudaSetDevice(r.device);
    cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking);
  }
  Team* p = t.get();
  teams()[kind] = std::move(t);
  return p;
}

void Team::destroyAll() {
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& kv : teams()) {
    std::vector<std::thread> th;
    for (Rank& r : kv.second->ranks_)
      th.emplace_back([&r] {
        cudaSetDevice(r.device);
        mkcclCommDestroy(r.comm);
        cudaStreamDestroy(r.stream);
      });
    for (auto& x : th) x.join();
  }
  teams().clear();
}

std::string Team::run(const std::function<std::string(Rank&)>& fn) {
  if (multiProcess_) {
    std::string err = fn(ranks_[0]);
    const bool ok = worldAllOk(err.empty());
    if (!ok && err.empty()) err = "failed on another rank";
    return ok ? std::string() : err;
  }
  std::vector<std::string> errs(ranks_.size());
  std::vector<std::thread> th;
  for (size_t i = 0; i < ranks_.size(); ++i)
    th.emplace_back([&, i] {
      cudaSetDevice(ranks_[i].device);
      errs[i] = fn(ranks_[i]);
    });
  for (auto& x : th) x.join();
  for (size_t i = 0; i < errs.size(); ++i)
    if (!errs[i].empty()) return "rank " + std::to_string(ranks_[i].rank) + ": " + errs[i];
  return "";
}

std::string Team::tune(const std::string& tuning) {
  for (Rank& r : ranks_)
    if (mkcclSetTuning(r.comm, tuning.c_str()) != mkcclSuccess)
      return "mkcclSetTuning(\"" + tuning + "\"): " + mkcclGetLastError(nullptr);
  return "";
}

uint64_t Team::sharedSeed() {
  uint64_t s = freshSeed();
  if (multiProcess_) {
    std::string err;
    launch::worldBroadcast(&s, sizeof(s), 0, &err);
  }
  return s;
}

}  // namespace test
}  // namespace mkccl
