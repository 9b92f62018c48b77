// A sweep on a Slurm cluster (docs/sweeps.md): a job array whose tasks each run one shard
// of the points into the shared sweep folder (`tpusim sweep SPEC --out DIR --shard I/K`),
// then a job that waits for the array and builds the table and the plots (`tpusim plot`).
// The scripts and job ids are kept in DIR/slurm/.
#pragma once

#include <string>

namespace tpu::sweep {

struct SlurmOptions {
  std::string partition;   // empty: the cluster's default
  int array_size = 4;      // tasks in the job array (shards)
  int cpus_per_task = 1;   // points each task runs at once
  std::string time_limit;  // --time for each task; empty: the partition's default
};

struct SlurmJobs {
  std::string array_job, finish_job;
};

// Writes DIR/slurm/task.sh and finish.sh and submits them with sbatch; throws
// RuntimeError with sbatch's message when submission fails (UsageError when sbatch is
// not installed).
SlurmJobs SubmitSweep(const std::string& tpusim, const std::string& spec_path,
                      const std::string& dir, const SlurmOptions& o);
// One line per job recorded in DIR/slurm/jobs.json with its state from squeue or sacct
// ("" when DIR was not run on Slurm).
std::string SlurmJobStates(const std::string& dir);

}  // namespace tpu::sweep
