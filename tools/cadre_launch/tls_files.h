// A throwaway public-key infrastructure for a local job (cadre_launch --tls): a CA made for
// the job and, per task, a key and a certificate it signs, valid for the loopback host, so
// that mutual TLS between the tasks is tested end to end. Keys are ECDSA P-256, certificates
// valid for a day; files are PEM, readable by the owner only.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace cadre::launch {

struct TlsFiles {
  std::string ca, cert, key;  // paths
};

// Writes ca.pem and <task>.{crt,key} for every task into `dir` (which must exist), each
// certificate naming `hosts` (IP addresses or DNS names) as subject alternative names.
// Throws UnavailableError naming what failed.
std::map<std::string, TlsFiles> make_job_pki(const std::string& dir,
                                             const std::vector<std::string>& tasks,
                                             const std::vector<std::string>& hosts);

}  // namespace cadre::launch
