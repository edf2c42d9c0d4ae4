#include "topo/mapping.h"
#include <algorithm>
#include <map>
#include "base/check.h"
#include "topo/pci_id.h"

namespace mkccl {

const char* topoLevelName(TopoLevel level) {
  switch (level) {
    case TopoLevel::Switch: return "switch";
    case TopoLevel::HostBridge: return "host-bridge";
    case TopoLevel::Numa: return "numa";
    case TopoLevel::Socket: return "socket";
    default: return "system";
  }
}

TopoCloseness topoCloseness(const TopoPlace& gpu, const TopoPlace& nic) {
  TopoCloseness c;
  size_t n = std::min(gpu.pciPath.size(), nic.pciPath.size());
  size_t shared = 0;
  while (shared < n && gpu.pciPath[shared] == nic.pciPath[shared]) shared++;
  c.shared = (int)shared;
  if (shared >= 2) {
    c.level = TopoLevel::Switch;
  } else if (shared == 1) {
    c.level = TopoLevel::HostBridge;
  } else if (gpu.numa >= 0 && gpu.numa == nic.numa) {
    c.level = TopoLevel::Numa;
  } else if (gpu.socket >= 0 && gpu.socket == nic.socket) {
    c.level = TopoLevel::Socket;
  } else {
    c.level = TopoLevel::System;
  }
  if (c.level != TopoLevel::Switch) c.shared = 0;  // only ranks NICs within a switch
  return c;
}

namespace {

struct PoolNic {
  const TopoNicDesc* desc;
  TopoNic nic;  // with the port to use
};

// Builds the pool the rules choose from. Automatic: usable NICs; else the named ones.
mkcclResult_t buildPool(const TopoMachine& m, const std::vector<NetDeviceChoice>& choices,
                        std::vector<PoolNic>* pool) {
  pool->clear();
  if (choices.empty()) {
    for (const TopoNicDesc& d : m.nics)
      if (d.nic.state != "down" && !d.nic.pci.empty()) pool->push_back({&d, d.nic});
    return mkcclSuccess;
  }
  for (const NetDeviceChoice& c : choices) {
    const TopoNicDesc* found = nullptr;
    for (const TopoNicDesc& d : m.nics)
      if (d.nic.name == c.name) found = &d;
    if (!found) {
      std::string names;
      for (const TopoNicDesc& d : m.nics) names += (names.empty() ? "" : ", ") + d.nic.name;
      return setError(mkcclInvalidUsage, "MKCCL_NET_DEVICES names %s, which is not an RDMA NIC of this machine (%s: %s)",
                      c.name.c_str(), m.source.c_str(), names.empty() ? "it has none" : names.c_str());
    }
    PoolNic p{found, found->nic};
    if (c.port > 0) {
      if (found->nic.nports > 0 && c.port > found->nic.nports)
        return setError(mkcclInvalidUsage, "MKCCL_NET_DEVICES asks for port %d of %s, which has %d port(s)", c.port,
                        c.name.c_str(), found->nic.nports);
      p.nic.port = c.port;
    }
    pool->push_back(p);
  }
  return mkcclSuccess;
}

// Which of n candidates (indexes) the i-th of k sharing GPUs gets, per rule 2; at most `cap`.
std::vector<int> share(int i, int k, int n, int cap) {
  std::vector<int> r;
  if (n >= k) {
    int per = std::min(cap, n / k);
    for (int j = 0; j < per; j++) r.push_back(i * (n / k) + j);
  } else {
    int serve = (k + n - 1) / n;
    r.push_back(i / serve);
  }
  return r;
}

}  // namespace

mkcclResult_t topoMapAll(const TopoMachine& m, const std::vector<NetDeviceChoice>& choices,
                         std::vector<TopoMapping>* out) {
  std::vector<PoolNic> pool;
  MKCCL_CHECK(buildPool(m, choices, &pool));
  const int nGpus = (int)m.gpus.size();
  out->assign(nGpus, TopoMapping());

  // GPUs in bus id order (the machine is normally sorted already; don't rely on it).
  std::vector<int> order(nGpus);
  for (int g = 0; g < nGpus; g++) order[g] = g;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return pciLess(m.gpus[a].pci, m.gpus[b].pci); });

  // Candidates per GPU: pool indexes at its best closeness, pool order kept (bus id order when
  // automatic, the user's order with MKCCL_NET_DEVICES).
  std::vector<std::vector<int>> cand(nGpus);
  std::vector<TopoCloseness> best(nGpus);
  for (int g = 0; g < nGpus; g++) {
    for (int p = 0; p < (int)pool.size(); p++) {
      TopoCloseness c = topoCloseness(m.gpus[g].place, pool[p].desc->place);
      if (cand[g].empty() || c.closerThan(best[g])) {
        best[g] = c;
        cand[g].assign(1, p);
      } else if (c == best[g]) {
        cand[g].push_back(p);
      }
    }
  }

  std::vector<int> load(pool.size(), 0);
  std::vector<std::vector<int>> chosen(nGpus);
  auto isNear = [&](int g) { return best[g].level <= TopoLevel::HostBridge; };

  // Groups of GPUs with the same candidates, in order of their first GPU (by bus id).
  auto groups = [&](bool nearPass) {
    std::vector<std::vector<int>> keys, members;
    for (int g : order) {
      if (cand[g].empty() || isNear(g) != nearPass) continue;
      std::vector<int> key = cand[g];
      key.push_back((int)best[g].level);
      auto it = std::find(keys.begin(), keys.end(), key);
      if (it == keys.end()) {
        keys.push_back(key);
        members.push_back({g});
      } else {
        members[it - keys.begin()].push_back(g);
      }
    }
    return members;
  };

  for (const std::vector<int>& grp : groups(true)) {
    const std::vector<int>& c = cand[grp[0]];
    for (int i = 0; i < (int)grp.size(); i++)
      for (int j : share(i, (int)grp.size(), (int)c.size(), 1 << 30)) {
        chosen[grp[i]].push_back(c[j]);
        load[c[j]]++;
      }
  }
  std::vector<std::vector<int>> far = groups(false);
  std::stable_sort(far.begin(), far.end(), [&](const std::vector<int>& a, const std::vector<int>& b) {
    return best[a[0]].level < best[b[0]].level;
  });
  for (const std::vector<int>& grp : far) {
    std::vector<int> c = cand[grp[0]];
    std::stable_sort(c.begin(), c.end(), [&](int a, int b) { return load[a] < load[b]; });
    const int k = (int)grp.size(), n = (int)c.size();
    for (int i = 0; i < k; i++) {
      int j = n >= k ? i : share(i, k, n, 1)[0];
      chosen[grp[i]].push_back(c[j]);
      load[c[j]]++;
    }
  }

  for (int g = 0; g < nGpus; g++) {
    TopoMapping& t = (*out)[g];
    const TopoGpuDesc& gpu = m.gpus[g];
    t.gpuPci = gpu.pci;
    t.numa = gpu.place.numa;
    for (int p : chosen[g]) t.nics.push_back(pool[p].nic);
    if (!chosen[g].empty()) {
      t.closeness = topoLevelName(best[g].level);
      if (!choices.empty()) t.closeness += " (MKCCL_NET_DEVICES)";
      t.proxyCpus = pool[chosen[g][0]].desc->place.cpus;
    }
    if (t.proxyCpus.empty()) t.proxyCpus = gpu.place.cpus;
  }
  return mkcclSuccess;
}

}  // namespace mkccl
