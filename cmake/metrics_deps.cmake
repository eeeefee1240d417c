# The libraries of `plumb daemon --metrics-bind-address` (cni-entry/daemon/metrics.cpp):
# prometheus-cpp's core (metrics, registry, the Prometheus text format) and civetweb (the HTTP
# server of /metrics, /healthz, /readyz). Debian 12 ships both as shared libraries only, and plumb
# is linked statically, so both are built once into the build directory from Debian's source
# packages (`apt-get source`, Debian's patches applied), as static position-independent archives
# with only what plumb uses: civetweb without TLS, CGI, files, Lua or websockets, with its C++
# wrapper (CivetServer); prometheus-cpp's core only (plumb serves the text itself; the pull
# library's exposer would add nothing but a second copy of the handler).
#
# Results: PLUMB_METRICS_INCLUDE (headers), PLUMB_METRICS_LIBS (archives, in link order), the
# build target plumb_metrics_deps.
include(ExternalProject)
include(cmake/apt_source.cmake)

plumb_apt_source(civetweb civetweb plumb_civetweb_src)
plumb_apt_source(prometheus-cpp prometheus-cpp plumb_prometheus_src)

set(plumb_metrics_prefix ${plumb_deps}/metrics-prefix)
set(plumb_metrics_common -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=${plumb_metrics_prefix} -DCMAKE_INSTALL_LIBDIR=lib
    -DCMAKE_C_COMPILER=${CMAKE_C_COMPILER} -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}
    -DCMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER} -DCMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}
    -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_SHARED_LIBS=OFF)
ExternalProject_Add(plumb_civetweb
  SOURCE_DIR ${plumb_civetweb_src}
  BINARY_DIR ${plumb_deps}/civetweb-build
  CMAKE_ARGS ${plumb_metrics_common} -DCIVETWEB_BUILD_TESTING=OFF -DCIVETWEB_ENABLE_SERVER_EXECUTABLE=OFF
             -DCIVETWEB_INSTALL_EXECUTABLE=OFF -DCIVETWEB_ENABLE_CXX=ON -DCIVETWEB_ENABLE_SSL=OFF
             -DCIVETWEB_DISABLE_CGI=ON -DCIVETWEB_SERVE_NO_FILES=ON -DCIVETWEB_ENABLE_IPV6=ON
             -DCIVETWEB_ENABLE_ASAN=OFF -DCIVETWEB_ENABLE_DEBUG_TOOLS=OFF
  BUILD_BYPRODUCTS ${plumb_metrics_prefix}/lib/libcivetweb.a ${plumb_metrics_prefix}/lib/libcivetweb-cpp.a
  UPDATE_COMMAND "" PATCH_COMMAND ""
  LOG_CONFIGURE ON LOG_BUILD ON LOG_INSTALL ON LOG_OUTPUT_ON_FAILURE ON)
ExternalProject_Add(plumb_prometheus_cpp
  SOURCE_DIR ${plumb_prometheus_src}
  BINARY_DIR ${plumb_deps}/prometheus-cpp-build
  DEPENDS plumb_civetweb
  CMAKE_ARGS ${plumb_metrics_common} -DENABLE_PULL=OFF -DENABLE_PUSH=OFF -DENABLE_COMPRESSION=OFF -DENABLE_TESTING=OFF
             -DUSE_THIRDPARTY_LIBRARIES=OFF -DGENERATE_PKGCONFIG=OFF
  BUILD_BYPRODUCTS ${plumb_metrics_prefix}/lib/libprometheus-cpp-core.a
  UPDATE_COMMAND "" PATCH_COMMAND ""
  LOG_CONFIGURE ON LOG_BUILD ON LOG_INSTALL ON LOG_OUTPUT_ON_FAILURE ON)
add_custom_target(plumb_metrics_deps DEPENDS plumb_civetweb plumb_prometheus_cpp)

set(PLUMB_METRICS_INCLUDE ${plumb_metrics_prefix}/include)
set(PLUMB_METRICS_LIBS ${plumb_metrics_prefix}/lib/libprometheus-cpp-core.a ${plumb_metrics_prefix}/lib/libcivetweb-cpp.a
    ${plumb_metrics_prefix}/lib/libcivetweb.a)
