# Self-contained host binaries (PLUMB_STATIC): what `plumb install` copies onto a node runs there
# whatever its C library, as the reference plugins and Multus (static Go binaries) do. plumb is
# linked statically (glibc's static start-up) with Debian's static archives; it dlopen()s
# nothing. Two of its libraries have no usable archive in Debian 12, so this file provides them:
#
# - libcurl: Debian's libcurl.a is built with GSSAPI (Kerberos ships no static archive), LDAP,
#   RTMP and SSH, so it cannot be linked statically. A libcurl of the same Debian source package
#   (`apt-get source curl` at the version of the installed libcurl4-openssl-dev, Debian's patches
#   applied) is built once into the build directory, with HTTP only: OpenSSL for TLS, nghttp2 for
#   kubelet's gRPC, c-ares as its resolver (it reads /etc/hosts and /etc/resolv.conf itself:
#   glibc's getaddrinfo in a static binary would need the node's own glibc NSS modules). The link
#   still warns that libcrypto's BIO_lookup and DSO loader and c-ares's service-name lookups use
#   NSS or dlopen: paths plumb never takes (curl opens its own sockets and passes numeric ports to
#   c-ares; OpenSSL's config, which could load modules, is not read).
# - libmnl: Debian 12's libmnl-dev has no libmnl.a; Debian 13's (libmnl 1.0.5, ABI-compatible with
#   1.0.4's headers and libnftnl) has one, taken from its package in the same archive (the pool
#   directory apt names for Debian 12's libmnl-dev), checked against the SHA-256 below.
#
# Results: PLUMB_STATIC_CURL_LIBS (libcurl and what it needs, archives), PLUMB_STATIC_MNL (the
# libmnl.a path), the build target plumb_static_curl, PLUMB_PROTOBUF_LITE_ARCHIVE.
include(ExternalProject)
include(cmake/apt_source.cmake)
set(plumb_multiarch_lib /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE})

function(plumb_require_archive var name)
  find_file(${var} ${name} PATHS ${plumb_multiarch_lib} NO_DEFAULT_PATH)
  if(NOT ${var})
    message(FATAL_ERROR "PLUMB_STATIC: ${plumb_multiarch_lib}/${name} is missing (scripts/install-deps installs it; -DPLUMB_STATIC=OFF builds the dynamic plumb)")
  endif()
endfunction()

# libmnl.a: Debian's own where a future libmnl-dev ships one, else Debian 13's package.
if(EXISTS ${plumb_multiarch_lib}/libmnl.a)
  set(PLUMB_STATIC_MNL ${plumb_multiarch_lib}/libmnl.a)
else()
  set(plumb_mnl_deb libmnl-dev_1.0.5-3+b1_amd64.deb)
  set(plumb_mnl_sha256 376202c3b287ce2401436a179c48817693dbe439fac4b3371fbcfa66888b65df)
  set(PLUMB_STATIC_MNL ${plumb_deps}/libmnl/usr/lib/x86_64-linux-gnu/libmnl.a)
  if(NOT EXISTS ${PLUMB_STATIC_MNL})
    if(NOT CMAKE_LIBRARY_ARCHITECTURE STREQUAL "x86_64-linux-gnu")
      message(FATAL_ERROR "PLUMB_STATIC: no libmnl.a for ${CMAKE_LIBRARY_ARCHITECTURE} (set -DPLUMB_STATIC=OFF)")
    endif()
    # The pool directory of libmnl in the archive apt is configured with (every suite's packages
    # share it), from apt's own answer for the installed suite's package.
    execute_process(COMMAND apt-get download --print-uris libmnl-dev OUTPUT_VARIABLE plumb_mnl_uri
                    OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
    string(REGEX MATCH "'([^']+)/libmnl-dev_[^/']+'" plumb_mnl_match "${plumb_mnl_uri}")
    if(NOT plumb_mnl_match)
      message(FATAL_ERROR "PLUMB_STATIC: apt gave no location for libmnl-dev (run apt-get update): ${plumb_mnl_uri}")
    endif()
    file(DOWNLOAD ${CMAKE_MATCH_1}/${plumb_mnl_deb} ${plumb_deps}/${plumb_mnl_deb}
         EXPECTED_HASH SHA256=${plumb_mnl_sha256} STATUS plumb_mnl_status)
    list(GET plumb_mnl_status 0 plumb_mnl_rc)
    if(NOT plumb_mnl_rc EQUAL 0)
      message(FATAL_ERROR "PLUMB_STATIC: cannot fetch ${plumb_mnl_deb} from Debian's archive: ${plumb_mnl_status}")
    endif()
    execute_process(COMMAND dpkg-deb -x ${plumb_deps}/${plumb_mnl_deb} ${plumb_deps}/libmnl COMMAND_ERROR_IS_FATAL ANY)
  endif()
endif()

# libcurl's source: Debian's, the version of the installed headers.
execute_process(COMMAND dpkg-query -W -f=\${source:Version} libcurl4-openssl-dev OUTPUT_VARIABLE plumb_curl_version
                OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
plumb_apt_source(curl curl=${plumb_curl_version} plumb_curl_src)

# HTTP and HTTPS only, static, position-independent (it also goes into the test executables).
# plumb compiles against Debian's headers of the same version and links the archive in the build tree.
# Its build directory is named after the source tree, so a new curl version (or a build directory
# of an older layout) configures afresh instead of meeting another source's CMakeCache.
get_filename_component(plumb_curl_tree_name ${plumb_curl_src} NAME)
set(plumb_curl_build ${plumb_deps}/${plumb_curl_tree_name}-build)
set(plumb_curl_archive ${plumb_curl_build}/lib/libcurl.a)
ExternalProject_Add(plumb_static_curl
  SOURCE_DIR ${plumb_curl_src}
  BINARY_DIR ${plumb_curl_build}
  CMAKE_ARGS -DCMAKE_BUILD_TYPE=Release
             -DCMAKE_C_COMPILER=${CMAKE_C_COMPILER} -DCMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER}
             -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_SHARED_LIBS=OFF -DBUILD_CURL_EXE=OFF -DBUILD_TESTING=OFF
             -DENABLE_MANUAL=OFF -DPICKY_COMPILER=OFF -DCURL_ENABLE_EXPORT_TARGET=OFF
             -DHTTP_ONLY=ON -DCURL_USE_OPENSSL=ON -DUSE_NGHTTP2=ON -DENABLE_ARES=ON -DENABLE_UNIX_SOCKETS=ON
             -DCURL_DISABLE_LDAP=ON -DCURL_DISABLE_LDAPS=ON -DCURL_USE_LIBSSH2=OFF -DCURL_USE_LIBSSH=OFF
             -DCURL_USE_GSSAPI=OFF -DUSE_LIBIDN2=OFF -DCURL_USE_LIBPSL=OFF -DCURL_ZLIB=OFF -DCURL_BROTLI=OFF
             -DCURL_ZSTD=OFF -DCURL_DISABLE_COOKIES=ON -DCURL_DISABLE_ALTSVC=ON -DCURL_DISABLE_HSTS=ON
             -DCURL_DISABLE_NETRC=ON -DCURL_DISABLE_NTLM=ON -DCURL_DISABLE_DOH=ON -DCURL_DISABLE_MIME=ON
             -DCURL_DISABLE_PROGRESS_METER=ON
             # The node's openssl.cnf may be another OpenSSL's (providers, crypto policies): not read.
             -DCURL_DISABLE_OPENSSL_AUTO_LOAD_CONFIG=ON
             -DCURL_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt -DCURL_CA_PATH=/etc/ssl/certs
  BUILD_BYPRODUCTS ${plumb_curl_archive}
  UPDATE_COMMAND "" PATCH_COMMAND "" INSTALL_COMMAND ""
  LOG_CONFIGURE ON LOG_BUILD ON LOG_OUTPUT_ON_FAILURE ON)

foreach(lib ssl crypto nghttp2 cares protobuf-lite)
  string(MAKE_C_IDENTIFIER "PLUMB_ARCHIVE_${lib}" var)
  plumb_require_archive(${var} lib${lib}.a)
endforeach()
set(PLUMB_STATIC_CURL_LIBS ${plumb_curl_archive} ${PLUMB_ARCHIVE_nghttp2} ${PLUMB_ARCHIVE_cares} ${PLUMB_ARCHIVE_ssl}
    ${PLUMB_ARCHIVE_crypto})
set(PLUMB_PROTOBUF_LITE_ARCHIVE ${PLUMB_ARCHIVE_protobuf_lite})
