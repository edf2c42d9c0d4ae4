// The discovered machine and its mapping as text for people, as JSON for programs (mkccl-topo),
// and as one log line per GPU (topoInitComm at INFO).
#pragma once
#include <string>
#include <vector>
#include "topo/machine.h"
#include "topo/topo.h"

namespace mkccl {

// maps[i] belongs to m.gpus[i].
std::string topoReportText(const TopoMachine& m, const std::vector<TopoMapping>& maps);
// {"gpus": [{"pci", "numa", "nics": [names], "cpus": "0-31"}...], "nics": [{"name", "pci", "numa",
// "type", "state"}...]}: GPUs by bus id, NICs as in m.
std::string topoReportJson(const TopoMachine& m, const std::vector<TopoMapping>& maps);
// "GPU 0000:19:00.0 numa 0 -> mlx5_0 port 1 (ib, active, 400 Gb/s) [switch]; proxy CPUs 0-31"
std::string topoMappingLine(const TopoMapping& t);

}  // namespace mkccl
