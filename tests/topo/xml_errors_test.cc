// Topology files that are missing or malformed: mkcclInvalidUsage with a message naming the file.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <random>
#include "machines.h"
#include "base/log.h"
#include "tmp_dir.h"
#include "topo/discover.h"

namespace mkccl {
namespace test {
namespace {

void expectBad(const std::string& path, const char* why) {
  TopoMachine m;
  m.source = "poison";
  EXPECT_EQ(mkcclInvalidUsage, topoDiscover(path.c_str(), &m)) << why;
  std::string msg = lastError();
  EXPECT_NE(std::string::npos, msg.find(path)) << why << ": " << msg;
  EXPECT_TRUE(m.gpus.empty() && m.nics.empty()) << why;
}

TEST(TopoXmlErrors, MissingEmptyDirectory) {
  expectBad(scratchDir() + "/does-not-exist.xml", "missing");
  expectBad(writeScratch("empty.xml", ""), "empty");
  std::string dir = scratchDir() + "/a-directory.xml";
  ASSERT_EQ(0, mkdir(dir.c_str(), 0700));
  expectBad(dir, "directory");
}

TEST(TopoXmlErrors, NotTopologies) {
  expectBad(writeScratch("text.xml", "this is not XML at all\n"), "plain text");
  expectBad(writeScratch("other.xml", "<?xml version=\"1.0\"?>\n<foo><bar/></foo>\n"), "XML of something else");
  expectBad(writeScratch("json.xml", "{\"topology\": 1}\n"), "JSON");
}

TEST(TopoXmlErrors, Truncated) {
  const std::string full = dgxNode().xml.str();
  std::mt19937_64 rng(std::random_device{}());
  // Anywhere before the closing tags: at least </object></topology> goes missing.
  for (int i = 0; i < 8; i++) {
    size_t cut = std::uniform_int_distribution<size_t>(full.size() / 8, full.size() - 40)(rng);
    SCOPED_TRACE("cut at " + std::to_string(cut) + " of " + std::to_string(full.size()));
    expectBad(writeScratch("cut" + std::to_string(i) + ".xml", full.substr(0, cut)), "truncated");
  }
}

TEST(TopoXmlErrors, GoodFileStillLoadsAfterBadOnes) {
  TopoMachine m;
  std::string good = writeScratch("good.xml", dgxNode().xml.str());
  if (!topoHaveHwloc()) {
    // Nothing can read it: a clear refusal rather than a silent empty topology.
    EXPECT_EQ(mkcclInvalidUsage, topoDiscover(good.c_str(), &m));
    EXPECT_NE(std::string::npos, std::string(lastError()).find("without hwloc")) << lastError();
    return;
  }
  ASSERT_EQ(mkcclSuccess, topoDiscover(good.c_str(), &m)) << lastError();
  EXPECT_EQ(8u, m.gpus.size());
}

}  // namespace
}  // namespace test
}  // namespace mkccl
