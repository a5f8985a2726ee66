// `dynapar controller`, `launch` and `bench runtime --local N`: their flags, parsed into the
// library's options (actors/remote/over_nodes.hpp), which composes the run over nodes.
#pragma once

#include "actors/remote/over_nodes.hpp"
#include "train_job.hpp"

namespace dynapar::cli {

struct controller_options : actors::remote::over_nodes_options {
  train_options train;
};

inline status load_keys(controller_options& o) { return actors::remote::load_keys(o, o.train.run.out, o.train.job); }

inline result<training::train_outcome> train_remote(training::prepared_job& p, const training::train_callbacks& cb,
                                                    const controller_options& o) {
  return actors::remote::train_over_nodes(p, cb, o);
}

}  // namespace dynapar::cli
