#include "comm/keys.hpp"

#include <sodium.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace dynapar::comm {
namespace fs = std::filesystem;
namespace {

bool z85_key(const std::string& s) {
  if (s.size() != 40) return false;
  std::uint8_t raw[32];
  return zmq_z85_decode(raw, s.c_str()) != nullptr;
}

bool good_name(const std::string& n) {
  return !n.empty() && n.size() <= 64 &&
         std::all_of(n.begin(), n.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; }) &&
         n[0] != '.';
}

// "field: value" lines; '#' starts a comment.
result<std::map<std::string, std::string>> read_fields(const std::string& path) {
  std::error_code ec;
  if (const auto size = fs::file_size(path, ec); !ec && size > 4096)
    return make_error("bad_key", path + ": not a dynapar key file (" + std::to_string(size) + " bytes)");
  std::ifstream in(path);
  if (!in) return make_error("bad_key", "cannot read key file " + path);
  std::map<std::string, std::string> f;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (++n > 64) return make_error("bad_key", path + ": not a dynapar key file (too many lines)");
    if (line.empty() || line[0] == '#') continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) return make_error("bad_key", path + ":" + std::to_string(n) + ": expected 'field: value'");
    auto value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    f[line.substr(0, colon)] = value;
  }
  return f;
}

result<public_key> public_from(const std::map<std::string, std::string>& f, const std::string& path) {
  public_key k;
  for (const char* field : {"name", "role", "public"})
    if (!f.count(field)) return make_error("bad_key", path + ": missing '" + field + "'");
  k.name = f.at("name");
  if (!good_name(k.name)) return make_error("bad_key", path + ": name '" + k.name + "' (letters, digits, - _ . only)");
  auto role = parse_role(f.at("role"));
  if (!role) return make_error("bad_key", path + ": " + role.err().message);
  k.role = *role;
  k.key = f.at("public");
  if (!z85_key(k.key)) return make_error("bad_key", path + ": 'public' is not a 40-character Z85 key");
  return k;
}

// Created afresh with its mode under a temporary name (O_EXCL), then renamed over the name: a
// secret is never readable by others, not even briefly, and a controller reading authorized/
// while a node writes its key there never sees half a file.
status write_file(const fs::path& p, const std::string& text, ::mode_t mode) {
  const auto tmp = p.string() + ".tmp" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove(tmp, ec);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL, mode);
  if (fd < 0) return make_error("io", "cannot write " + p.string());
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<::ssize_t>(text.size());
  if (::close(fd) != 0 || !ok || ::rename(tmp.c_str(), p.c_str()) != 0) {
    fs::remove(tmp, ec);
    return make_error("io", "cannot write " + p.string());
  }
  return ok_status();
}

status make_dir(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir)) return ok_status();
  fs::create_directories(dir, ec);
  if (ec) return make_error("io", "cannot make " + dir + ": " + ec.message());
  fs::permissions(dir, fs::perms::owner_all, ec);
  return ok_status();
}

std::string public_text(const public_key& k) {
  return "name: " + k.name + "\nrole: " + to_string(k.role) + "\npublic: " + k.key + "\n";
}

}  // namespace

std::string to_string(key_role r) {
  switch (r) {
    case key_role::controller: return "controller";
    case key_role::node: return "node";
    case key_role::operator_: return "operator";
  }
  return "?";
}

result<key_role> parse_role(const std::string& s) {
  if (s == "controller") return key_role::controller;
  if (s == "node") return key_role::node;
  if (s == "operator") return key_role::operator_;
  return make_error("bad_role", "role '" + s + "' (controller, node or operator)");
}

result<key_pair> make_key_pair(const std::string& name, key_role role) {
  if (!good_name(name)) return make_error("bad_key", "key name '" + name + "' (letters, digits, - _ . only)");
  char pub[41], sec[41];
  if (zmq_curve_keypair(pub, sec) != 0)
    return make_error("no_curve", "this libzmq cannot make CURVE keys (built without libsodium?)");
  return key_pair{public_key{name, role, pub}, sec};
}

status write_public_key(const std::string& dir, const public_key& k) {
  if (auto st = make_dir(dir); !st) return st;
  return write_file((fs::path(dir) / (k.name + ".pub")).string(), "# dynapar CURVE public key (docs/SECURITY.md)\n" + public_text(k),
                    0644);
}

status write_key_pair(const std::string& dir, const key_pair& k) {
  if (auto st = make_dir(dir); !st) return st;
  if (auto st = write_file((fs::path(dir) / (k.pub.name + ".key")).string(),
                           "# dynapar CURVE key pair: keep it secret (docs/SECURITY.md)\n" + public_text(k.pub) + "secret: " + k.secret + "\n",
                           0600);
      !st)
    return st;
  return write_public_key(dir, k.pub);
}

result<key_pair> read_key_pair(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return make_error("bad_keys", "no key file " + path);
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    std::ostringstream mode;
    mode << std::oct << (st.st_mode & 0777);
    return make_error("bad_key_mode", "key file " + path + " may be read by others (mode 0" + mode.str() +
                                             "): its secret is no longer private; chmod 600 " + path + " if it is still yours");
  }
  auto f = read_fields(path);
  if (!f) return f.err();
  auto pub = public_from(*f, path);
  if (!pub) return pub.err();
  if (!f->count("secret") || !z85_key(f->at("secret")))
    return make_error("bad_key", path + ": 'secret' is missing or not a 40-character Z85 key");
  key_pair k{*pub, f->at("secret")};
  char derived[41];
  if (zmq_curve_public(derived, k.secret.c_str()) != 0 || k.pub.key != derived)
    return make_error("bad_key", path + ": the public key does not belong to the secret key");
  return k;
}

result<public_key> read_public_key(const std::string& path) {
  auto f = read_fields(path);
  if (!f) return f.err();
  return public_from(*f, path);
}

result<std::vector<public_key>> read_public_keys(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> paths;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".pub") paths.push_back(e.path().string());
  if (ec) return make_error("bad_keys", "cannot read " + dir + ": " + ec.message());
  std::sort(paths.begin(), paths.end());
  std::vector<public_key> out;
  for (const auto& p : paths) {
    auto k = read_public_key(p);
    if (!k) return k.err();
    out.push_back(*k);
  }
  if (out.empty()) return make_error("bad_keys", dir + " lists no public key (*.pub): no node or operator could connect");
  return out;
}

result<server_keys> load_server_keys(const std::string& dir) {
  auto own = read_key_pair((fs::path(dir) / "controller.key").string());
  if (!own) return own.err();
  if (own->pub.role != key_role::controller)
    return make_error("bad_key", dir + "/controller.key is a " + to_string(own->pub.role) + " key, not a controller key");
  const auto from = (fs::path(dir) / "authorized").string();
  auto authorized = read_public_keys(from);
  if (!authorized) return authorized.err();
  return server_keys{*own, *authorized, from};
}

std::function<std::optional<std::vector<public_key>>()> authorized_reloader(std::string dir,
                                                                             std::function<void(const std::string&)> on_error) {
  return [dir = std::move(dir), on_error = std::move(on_error), read = std::int64_t{-1}]() mutable -> std::optional<std::vector<public_key>> {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) return std::nullopt;
    const std::int64_t mtime = std::int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
    // A file system with coarse times may show no change for a key written in the tick of
    // the last read: a directory changed in the last 2 s is read again.
    const bool recent = ::time(nullptr) - st.st_mtim.tv_sec < 2;
    if (mtime == read && !recent) return std::nullopt;
    auto keys = read_public_keys(dir);
    if (!keys) {
      if (on_error) on_error(keys.err().message);
      return std::nullopt;
    }
    read = mtime;
    return std::move(*keys);
  };
}

result<client_keys> load_client_keys(const std::string& dir, const std::vector<std::string>& names) {
  std::string tried;
  for (const auto& n : names) {
    const auto path = (fs::path(dir) / (n + ".key")).string();
    if (!fs::exists(path)) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    auto own = read_key_pair(path);
    if (!own) return own.err();
    auto server = read_public_key((fs::path(dir) / "controller.pub").string());
    if (!server) return server.err();
    if (server->role != key_role::controller)
      return make_error("bad_key", dir + "/controller.pub is a " + to_string(server->role) + " key, not the controller's");
    return client_keys{*own, server->key};
  }
  return make_error("bad_keys", "no key file (" + tried + "); make one with `dynapar keygen --out " + dir + " --role ROLE --name NAME`");
}

status write_local_keys(const std::string& dir, int nodes, const std::vector<int>& devices) {
  const std::string ctl_dir = local_controller_keys(dir), op_dir = local_operator_keys(dir);
  const auto authorized = (fs::path(ctl_dir) / "authorized").string();
  auto controller = make_key_pair("controller", key_role::controller);
  if (!controller) return controller.err();
  if (auto st = write_key_pair(ctl_dir, *controller); !st) return st;
  std::vector<std::pair<std::string, std::string>> pairs = {{"operator", op_dir}};  // name, where its secret goes
  for (int i = 0; i < nodes; ++i) pairs.emplace_back("node-" + std::to_string(i), dir);
  for (int id : devices) pairs.emplace_back("device-" + std::to_string(id), dir);
  for (const auto& [name, where] : pairs) {
    auto k = make_key_pair(name, name == "operator" ? key_role::operator_ : key_role::node);
    if (!k) return k.err();
    if (auto st = write_key_pair(where, *k); !st) return st;
    if (auto st = write_public_key(authorized, k->pub); !st) return st;
  }
  if (auto st = write_public_key(op_dir, controller->pub); !st) return st;
  return write_public_key(dir, controller->pub);  // last: whoever waits for it finds every key in place
}

result<std::string> file_sha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("io", "cannot read " + path);
  if (sodium_init() < 0) return make_error("no_crypto", "libsodium failed to start");
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    crypto_hash_sha256_update(&st, reinterpret_cast<const unsigned char*>(buf.data()), static_cast<unsigned long long>(in.gcount()));
  }
  unsigned char h[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&st, h);
  char hex[2 * crypto_hash_sha256_BYTES + 1];
  sodium_bin2hex(hex, sizeof hex, h, sizeof h);
  return std::string(hex);
}

}  // namespace dynapar::comm
