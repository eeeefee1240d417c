// libcurl, loaded on first use.
//
// plumb runs once per CNI verb, so its start-up cost is paid on every pod ADD and DEL. Linked
// normally, libcurl (and through it OpenSSL, Kerberos, LDAP, SSH, nghttp2 ...) adds some 30
// shared objects to map and relocate at every start: about 6 ms, half of a whole ADD, although
// only nodes talking to the API server or etcd ever make an HTTP request. So plumb does not
// link it: these definitions of the few libcurl entry points plumb calls (engine/base/http.cpp
// is their one caller) forward to the real library, dlopen()ed the first time one is called.
// Everything HTTP and TLS is still done by libcurl (and the OpenSSL it loads) itself; base64
// is engine/base/base64.cpp, which needs no library.
#include <curl/curl.h>
#include <dlfcn.h>

#include <cstdarg>
#include <mutex>
#include <string>

namespace {

struct Lib {
  void* handle = nullptr;
  std::string error;
};

/// libcurl's ABI name (Debian's libcurl4).
constexpr const char* kCurlSoname = "libcurl.so.4";

/// libcurl, dlopen()ed on the first call.
Lib& libcurl() {
  static Lib lib;
  static std::once_flag once;
  std::call_once(once, [] {
    lib.handle = ::dlopen(kCurlSoname, RTLD_NOW | RTLD_LOCAL);
    if (lib.handle == nullptr) lib.error = ::dlerror();
  });
  return lib;
}

template <class Fn>
Fn sym(const char* name) {
  Lib& lib = libcurl();
  if (lib.handle == nullptr) return nullptr;
  return reinterpret_cast<Fn>(::dlsym(lib.handle, name));
}

#define PLUMB_CURL(name, type) static const auto real = sym<type>(#name)

}  // namespace

// curl.h declares the last named parameter of curl_easy_setopt/getinfo as an enum; clang warns
// that va_start on it could be undefined. CURLoption and CURLINFO are int-sized enums, whose
// promotion leaves them unchanged, so the definitions must keep libcurl's exact signatures.
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wvarargs"
#endif

extern "C" {

CURLcode curl_global_init(long flags) {
  PLUMB_CURL(curl_global_init, CURLcode (*)(long));
  return real != nullptr ? real(flags) : CURLE_FAILED_INIT;
}

CURL* curl_easy_init(void) {
  PLUMB_CURL(curl_easy_init, CURL* (*)(void));
  return real != nullptr ? real() : nullptr;
}

// curl_easy_setopt takes one argument whose type the option's range gives (curl.h
// CURLOPTTYPE_*): read it with that type and pass it on.
CURLcode curl_easy_setopt(CURL* curl, CURLoption option, ...) {
  PLUMB_CURL(curl_easy_setopt, CURLcode (*)(CURL*, CURLoption, ...));
  if (real == nullptr) return CURLE_FAILED_INIT;
  va_list ap;
  va_start(ap, option);
  CURLcode rc;
  int kind = static_cast<int>(option);
  // The branches differ only in va_arg's type, which clang-tidy does not compare.
  if (kind < CURLOPTTYPE_OBJECTPOINT) {  // NOLINT(bugprone-branch-clone)
    rc = real(curl, option, va_arg(ap, long));
  } else if (kind < CURLOPTTYPE_FUNCTIONPOINT) {
    rc = real(curl, option, va_arg(ap, void*));
  } else if (kind < CURLOPTTYPE_OFF_T) {
    rc = real(curl, option, va_arg(ap, void (*)(void)));
  } else if (kind < CURLOPTTYPE_BLOB) {
    rc = real(curl, option, va_arg(ap, curl_off_t));
  } else {
    rc = real(curl, option, va_arg(ap, void*));
  }
  va_end(ap);
  return rc;
}

// Every curl_easy_getinfo takes a pointer to where the value goes.
CURLcode curl_easy_getinfo(CURL* curl, CURLINFO info, ...) {
  PLUMB_CURL(curl_easy_getinfo, CURLcode (*)(CURL*, CURLINFO, ...));
  if (real == nullptr) return CURLE_FAILED_INIT;
  va_list ap;
  va_start(ap, info);
  CURLcode rc = real(curl, info, va_arg(ap, void*));
  va_end(ap);
  return rc;
}

CURLcode curl_easy_perform(CURL* curl) {
  PLUMB_CURL(curl_easy_perform, CURLcode (*)(CURL*));
  return real != nullptr ? real(curl) : CURLE_FAILED_INIT;
}

void curl_easy_cleanup(CURL* curl) {
  PLUMB_CURL(curl_easy_cleanup, void (*)(CURL*));
  if (real != nullptr) real(curl);
}

void curl_easy_reset(CURL* curl) {
  PLUMB_CURL(curl_easy_reset, void (*)(CURL*));
  if (real != nullptr) real(curl);
}

const char* curl_easy_strerror(CURLcode code) {
  PLUMB_CURL(curl_easy_strerror, const char* (*)(CURLcode));
  if (real != nullptr) return real(code);
  static const std::string msg = [] {
    std::string m = "libcurl (";  // appended, not `+`: GCC 12 misreports the latter (-Warray-bounds)
    m += kCurlSoname;
    m += ") cannot be loaded: ";
    m += libcurl().error;
    return m;
  }();
  return msg.c_str();
}

struct curl_slist* curl_slist_append(struct curl_slist* list, const char* s) {
  PLUMB_CURL(curl_slist_append, struct curl_slist* (*)(struct curl_slist*, const char*));
  return real != nullptr ? real(list, s) : nullptr;
}

char* curl_easy_unescape(CURL* curl, const char* url, int inlength, int* outlength) {
  PLUMB_CURL(curl_easy_unescape, char* (*)(CURL*, const char*, int, int*));
  return real != nullptr ? real(curl, url, inlength, outlength) : nullptr;
}

void curl_free(void* p) {
  PLUMB_CURL(curl_free, void (*)(void*));
  if (real != nullptr) real(p);
}

void curl_slist_free_all(struct curl_slist* list) {
  PLUMB_CURL(curl_slist_free_all, void (*)(struct curl_slist*));
  if (real != nullptr) real(list);
}

}  // extern "C"
