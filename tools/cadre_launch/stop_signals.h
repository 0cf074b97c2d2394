// The signals that ask the launcher to stop (SIGINT, SIGTERM, SIGHUP): caught, counted, and
// answered with a planned stop of every task.
#pragma once

namespace cadre::launch {

class Processes;

// Installs the handlers, without SA_RESTART, so that a signal wakes poll() at once.
void catch_stop_signals();

// How many stop signals came (0: none), and the last one.
int stop_requests();
int stop_signal();

// The launcher was asked to stop with `signal`: a planned stop of every task (the signal to
// each process group), the ps tasks last, since the chief's last checkpoint reads their
// variables; what is still running after `grace_secs`, or at a second request, gets
// SIGKILL. Returns kRestartExitCode when every task stopped cleanly, else 128 + `signal`.
int shut_down(Processes& processes, int signal, double grace_secs);

}  // namespace cadre::launch
