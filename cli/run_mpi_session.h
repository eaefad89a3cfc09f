#pragma once
// MPI for the lifetime of `refit run`: initialised when constructed, finalised when destroyed.
// MPI belongs to the program, not to the libraries it hands a Bootstrap to.
#include <mpi.h>

namespace refit::cli {

class MpiSession {
 public:
  MpiSession() : ok_(MPI_Init(nullptr, nullptr) == MPI_SUCCESS) {}
  ~MpiSession() {
    if (ok_ && !abandoned_) MPI_Finalize();
  }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  bool ok() const { return ok_; }
  // Skips MPI_Finalize, which waits for every rank: after a failed transfer a peer may be dead or
  // hung. The process then exits at once and mpirun ends the job (with --enable-recovery it lets
  // the other ranks finish failing on their own).
  void abandon() { abandoned_ = true; }

 private:
  bool ok_;
  bool abandoned_ = false;
};

}  // namespace refit::cli
