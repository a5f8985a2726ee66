// This process's peak resident memory, for the figures runs report (summary.json, node logs),
// and the host's memory available, which a node that describes itself announces.
#pragma once

namespace dynapar {

// MB: /proc/self/status's VmHWM. Not getrusage's ru_maxrss, which survives exec: a node that
// `launch` forks from a controller holding the whole model would report the controller's.
// 0 where /proc cannot be read.
double peak_rss_mb();

// MB: /proc/self/status's VmRSS, resident now. 0 where /proc cannot be read.
double resident_mb();

// MB: /proc/self/io's rchar, what this process read through read() so far: files and
// sockets, not mapped files. 0 where /proc cannot be read.
double read_mb();

// MB: /proc/meminfo's MemAvailable (what new work can take without swapping). 0 where /proc
// cannot be read.
double available_memory_mb();

}  // namespace dynapar
