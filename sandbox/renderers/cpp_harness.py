"""The C++ test harness: the source between a program's solution and its cases (sandbox/renderers/cpp.py).
"""

from __future__ import annotations


# Encoders are overloads on the exact C++ types (the signature fixes the returned type); the
# templates are declared before any is defined so nested types find each other. Strings come out
# as pure ASCII JSON (\uXXXX for everything else, invalid UTF-8 as U+FFFD), so no byte of a value
# can end a record line.
HARNESS = r"""
namespace codelm {
// Declared here, not through <cxxabi.h> and <sys/wait.h>: in a shared build the harness comes before
// the completions, which must not see names the prompt's <bits/stdc++.h> does not give them (the
// declarations match glibc's and libstdc++'s, so a completion that includes those headers still compiles).
extern "C" std::type_info* __cxa_current_exception_type() noexcept;
extern "C" char* __cxa_demangle(const char* mangled, char* buffer, std::size_t* length, int* status);
extern "C" int waitpid(int pid, int* status, int options);

void put(std::string& out, bool v);
void put(std::string& out, long v);
void put(std::string& out, double v);
void put(std::string& out, const std::string& v);
// The narrower types a whole program declares (BabelCode's int, long long, float, char).
void put(std::string& out, int v);
void put(std::string& out, long long v);
void put(std::string& out, float v);
void put(std::string& out, char v);
template <class T> void put(std::string& out, const std::vector<T>& v);
template <class T> void put(std::string& out, const std::set<T>& v);
template <class K, class V> void put(std::string& out, const std::map<K, V>& v);
template <class T> void put(std::string& out, const std::optional<T>& v);
template <class... T> void put(std::string& out, const std::tuple<T...>& v);

void put(std::string& out, bool v) { out += v ? "true" : "false"; }
void put(std::string& out, long v) { out += std::to_string(v); }
void put(std::string& out, double v) {
  if (std::isnan(v)) { out += "NaN"; return; }
  if (std::isinf(v)) { out += v > 0 ? "Infinity" : "-Infinity"; return; }
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, v);  // shortest round-trip form
  out.append(buffer, result.ptr);
}
void put(std::string& out, int v) { put(out, (long) v); }
void put(std::string& out, long long v) { put(out, (long) v); }
void put(std::string& out, float v) { put(out, (double) v); }
void put(std::string& out, char v) { put(out, std::string(1, v)); }
void put_code_unit(std::string& out, unsigned unit) {
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "\\u%04x", unit);
  out += buffer;
}
void put(std::string& out, const std::string& v) {
  out += '"';
  size_t i = 0, n = v.size();
  while (i < n) {
    unsigned char c = v[i];
    if (c == '"' || c == '\\') { out += '\\'; out += (char) c; i++; continue; }
    if (c >= 0x20 && c < 0x7f) { out += (char) c; i++; continue; }
    unsigned code = 0xFFFD;
    size_t length = 1;
    size_t need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (need == 1) code = c;
    else if (need > 1 && i + need <= n) {
      unsigned decoded = c & (0x7F >> need);
      bool valid = true;
      for (size_t k = 1; k < need; k++) {
        unsigned char next = v[i + k];
        if ((next & 0xC0) != 0x80) { valid = false; break; }
        decoded = (decoded << 6) | (next & 0x3F);
      }
      static const unsigned smallest[] = {0, 0, 0x80, 0x800, 0x10000};
      if (valid && decoded >= smallest[need] && decoded <= 0x10FFFF && (decoded < 0xD800 || decoded > 0xDFFF)) {
        code = decoded;
        length = need;
      }
    }
    if (code >= 0x10000) {
      code -= 0x10000;
      put_code_unit(out, 0xD800 + (code >> 10));
      put_code_unit(out, 0xDC00 + (code & 0x3FF));
    } else {
      put_code_unit(out, code);
    }
    i += length;
  }
  out += '"';
}
template <class T> void put(std::string& out, const std::vector<T>& v) {
  out += '[';
  bool first = true;
  for (const auto& item : v) {
    if (!first) out += ", ";
    first = false;
    put(out, static_cast<const T&>(item));  // vector<bool> hands out proxies
  }
  out += ']';
}
template <class T> void put(std::string& out, const std::set<T>& v) {
  out += '[';
  bool first = true;
  for (const T& item : v) {
    if (!first) out += ", ";
    first = false;
    put(out, item);
  }
  out += ']';
}
template <class K, class V> void put(std::string& out, const std::map<K, V>& v) {
  out += '[';
  bool first = true;
  for (const auto& entry : v) {
    if (!first) out += ", ";
    first = false;
    out += '[';
    put(out, entry.first);
    out += ", ";
    put(out, entry.second);
    out += ']';
  }
  out += ']';
}
template <class T> void put(std::string& out, const std::optional<T>& v) {
  if (v.has_value()) put(out, *v);
  else out += "null";
}
template <class... T> void put(std::string& out, const std::tuple<T...>& v) {
  out += '[';
  bool first = true;
  std::apply([&](const auto&... items) {
    ((out += first ? "" : ", ", first = false, put(out, items)), ...);
  }, v);
  out += ']';
}

std::string one_line(std::string text) {
  for (char& c : text) if (c == '\n' || c == '\r' || c == '\0') c = ' ';
  return text.size() > 300 ? text.substr(0, 300) : text;
}

std::string type_of_current_exception() {
  std::type_info* type = __cxa_current_exception_type();
  if (!type) return "unknown";
  int status = 0;
  char* name = __cxa_demangle(type->name(), nullptr, nullptr, &status);
  std::string out = status == 0 && name ? name : type->name();
  std::free(name);
  return out;
}

template <class T> std::string ok(const T& value) {
  std::string out = "ok ";
  put(out, value);
  return out;
}

// Runs in the child: the record for one call (`call` returns ok(...) of the function's value).
std::string record_of(std::string (*call)()) {
  try {
    return call();
  } catch (const std::exception& e) {
    return "exception " + type_of_current_exception() + ": " + e.what();
  } catch (const char* text) {
    return std::string("exception ") + text;
  } catch (const std::string& text) {
    return "exception " + text;
  } catch (...) {
    return "exception " + type_of_current_exception();
  }
}

void write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += (size_t) n;
  }
}

void run_case(int idx, std::string (*call)()) {
  std::cout.flush();
  std::fflush(nullptr);
  std::string record;
  int fds[2];
  pid_t child = -1;
  if (::pipe(fds) == 0) {
    child = ::fork();
    if (child == 0) {
      ::close(fds[0]);
      ::dup2(2, 1);  // the solution's own output goes to stderr
      std::string out = record_of(call);
      std::cout.flush();
      std::fflush(nullptr);
      write_all(fds[1], out);
      ::_exit(0);
    }
    ::close(fds[1]);
    if (child > 0) {
      char buffer[65536];
      for (;;) {
        ssize_t n = ::read(fds[0], buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        record.append(buffer, (size_t) n);
      }
    }
    ::close(fds[0]);
  }
  if (child < 0) {
    record = std::string("exception cannot start the test case: ") + std::strerror(errno);
  } else {
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
    if (WIFSIGNALED(status)) {
      record = std::string("exception killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
               ::strsignal(WTERMSIG(status)) + ")";
    } else if (record.empty() || WEXITSTATUS(status) != 0) {
      record = "exception exited with status " + std::to_string(WEXITSTATUS(status));
    }
  }
  if (record.compare(0, 3, "ok ") != 0) record = one_line(record);
  std::string line = "\n#codelm# " + std::to_string(idx) + " " + record + "\n";
  write_all(1, line);
}
}  // namespace codelm
"""
