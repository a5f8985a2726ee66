// This process's peak resident memory, for the figures runs report (summary.json, node logs).
#pragma once

namespace dynapar {

// MB: /proc/self/status's VmHWM. Not getrusage's ru_maxrss, which survives exec: a node that
// `launch` forks from a controller holding the whole model would report the controller's.
// 0 where /proc cannot be read.
double peak_rss_mb();

}  // namespace dynapar
