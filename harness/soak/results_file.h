// The soak's results file (issue 30): one JSON line per unit, a start line
// (seed, plan, world) and an end line per part of the run. One soak writes it
// at a time: a new file is created exclusively, an existing one is locked
// (flock) for as long as this object lives, waiting 5 s for a job that is
// still dying. A file holds one world and one run history: a resume from
// another world, or a file with a second start line, is refused. Every write
// is checked and whole: a line that cannot be written is cut back, never left
// half there, and error() says why.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdio>
#include <functional>
#include <string>

#include "harness/report/events.h"

namespace collcheck {

class ResultsFile {
 public:
  // Throws PlanError naming --results or --resume and what is wrong.
  ResultsFile(std::string path, bool resume, std::string world);
  ~ResultsFile();
  ResultsFile(const ResultsFile&) = delete;
  ResultsFile& operator=(const ResultsFile&) = delete;

  // For --resume: each line after the start line, in order; a unit written
  // twice (by two soaks before the lock existed) is passed once. An
  // unfinished last line (the unit in flight when a kill came) is dropped
  // and said on `out`. Throws PlanError for a line that is not JSON.
  void read_back(const std::function<void(const nlohmann::json& line, size_t number)>& each, Events& ev);
  void append(const nlohmann::json& j);
  // "" while every write worked; else why the first failed one did not.
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_, world_, error_;
  int fd_ = -1;
};

}  // namespace collcheck
