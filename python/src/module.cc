// refit._refit: the compiled part of the refit Python package. `import refit` is the interface;
// this module is what it calls (python/refit/).
#include "bindings.h"

NB_MODULE(_refit, m) {
  m.doc() =
      "refit's front door (refit/refit.h) for Python: problems, clusters, plans, predictions and "
      "executors. Use it through the refit package.";
  refit::python::bind_problem(m);
  refit::python::bind_cluster(m);
  refit::python::bind_plan(m);
  refit::python::bind_executor(m);
  refit::python::bind_sweep(m);
  refit::python::bind_elastic(m);
  refit::python::bind_files(m);
}
