// mkccl-perf's command line (parsed before any CUDA work, so that a mistake costs nothing and the
// parser can be tested where there is no GPU).
#pragma once
#include <stdio.h>
#include <string>
#include "perf.h"

namespace mkccl {
namespace perf {

enum ParseStatus { kParseOk = 0, kParseHelp = 1, kParseError = 2, kParseList = 3 };

// Fills *a from argv (argv[0] is the program). kParseError sets *err to a one-line reason.
int parseArgs(int argc, char** argv, Args* a, std::string* err);
void printUsage(FILE* f);

// "8", "4K", "16M", "1G" (binary multiples), "1024B".
bool parseSize(const std::string& s, size_t* out);
bool parseDtype(const std::string& s, mkcclDataType_t* out);
bool parseRedop(const std::string& s, mkcclRedOp_t* out);
// "4096x8192x8192,8192x8192x8192"
bool parseShapes(const std::string& s, std::vector<Shape>* out);

}  // namespace perf
}  // namespace mkccl
