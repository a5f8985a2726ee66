// CURVE keys (ZeroMQ's authenticated encryption, RFC 26) and who holds them (docs/SECURITY.md).
// A key pair is two Z85 strings of 40 characters; its files are NAME.key (public and secret
// halves, mode 0600, refused when others may read it) and NAME.pub (the public half only),
// each naming the key's role: the controller, a node, or an operator (inject, node --leave).
//
// Layouts of a --keys DIR:
//   controller: DIR/controller.key and DIR/authorized/*.pub (the clients it admits)
//   node, operator: DIR/NAME.key (their own) and DIR/controller.pub (pinned)
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace dynapar::comm {

enum class key_role { controller, node, operator_ };
std::string to_string(key_role r);
result<key_role> parse_role(const std::string& s);

struct public_key {
  std::string name;
  key_role role = key_role::node;
  std::string key;  // Z85, 40 characters
};

struct key_pair {
  public_key pub;
  std::string secret;  // Z85, 40 characters
};

// A fresh pair from libzmq's CSPRNG (libsodium).
result<key_pair> make_key_pair(const std::string& name, key_role role);
// Writes DIR/NAME.key (0600) and DIR/NAME.pub (0644); DIR is made (0700) when missing.
status write_key_pair(const std::string& dir, const key_pair& k);
status write_public_key(const std::string& dir, const public_key& k);  // DIR/NAME.pub
// Refuses a .key file that others than its owner may read or write.
result<key_pair> read_key_pair(const std::string& path);
result<public_key> read_public_key(const std::string& path);
// Every DIR/*.pub, sorted by name; an empty or missing directory is an error (nobody could
// connect), as is a file that does not parse.
result<std::vector<public_key>> read_public_keys(const std::string& dir);

// What a CURVE server needs: its own pair and the keys it admits.
struct server_keys {
  key_pair own;
  std::vector<public_key> authorized;
  std::string authorized_dir;  // where `authorized` was read from ("": given in memory)
};
// What a CURVE client needs: its own pair and the server key it pins.
struct client_keys {
  key_pair own;
  std::string server_key;
};
result<server_keys> load_server_keys(const std::string& dir);
// Reads DIR (an authorized/ directory) again when it changed since the last read: keys that
// nodes made and admitted after the controller started (a Slurm task's own key). Nothing
// when it did not change or cannot be read (`on_error` says why); never a partial list.
std::function<std::optional<std::vector<public_key>>()> authorized_reloader(std::string dir,
                                                                             std::function<void(const std::string&)> on_error = {});
// DIR/NAME.key for each name in `names`, the first that exists (so `node --leave` may use an
// operator key or, failing that, the node's own), and DIR/controller.pub.
result<client_keys> load_client_keys(const std::string& dir, const std::vector<std::string>& names);

// A whole deployment on one machine (throwaway keys), in three directories of mode 0700 that
// share no secret (docs/SECURITY.md): DIR, the nodes', with a pair per node that `launch`
// starts (node-0 .. node-(nodes-1)) and a pair device-ID per id in `devices` for a node
// started by hand whose first device it is, and controller.pub; DIR-controller with the
// controller's pair and authorized/ (every other public key); DIR-operator with the
// operator's pair and controller.pub. No two nodes prove the same key. DIR/controller.pub is
// written last, so whoever waits for it finds every key in place.
status write_local_keys(const std::string& dir, int nodes = 0, const std::vector<int>& devices = {});
inline std::string local_controller_keys(const std::string& dir) { return dir + "-controller"; }
inline std::string local_operator_keys(const std::string& dir) { return dir + "-operator"; }

// SHA-256 of a file's bytes, in hex (what a node checks a TorchScript model against).
result<std::string> file_sha256(const std::string& path);

}  // namespace dynapar::comm
