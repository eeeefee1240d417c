# Makes plumb's man page (section 8) from its help text with help2man, run by the plumb_man target
# (CMakeLists.txt): `plumb --help` and `plumb --version` give the synopsis, description and
# options, every subcommand's `--help` a part of the SUBCOMMANDS section, so the page says what the
# binary says. Writes OUT and OUT.gz (what is installed, as Debian's policy wants man pages).
#
# Inputs: PLUMB (the binary), HELP2MAN, GZIP, OUT.
set(page "[SUBCOMMANDS]\n")
foreach(sub install uninstall daemon reconcile)
  execute_process(COMMAND "${PLUMB}" ${sub} --help OUTPUT_VARIABLE help RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${PLUMB} ${sub} --help failed (${rc})")
  endif()
  # Verbatim roff: a backslash is written \e, and \& first keeps a line from being read as a request.
  string(REPLACE "\\" "\\e" help "${help}")
  string(REGEX REPLACE "\n$" "" help "${help}")
  string(REPLACE "\n" "\n\\&" help "${help}")
  string(APPEND page ".SS \"plumb ${sub}\"\n.nf\n\\&${help}\n.fi\n")
endforeach()
string(APPEND page "[ENVIRONMENT]
.TP
.B CNI_COMMAND, CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, CNI_ARGS, CNI_PATH
The CNI invocation, as a container runtime sets them (CNI specification, section 3). Without
CNI_COMMAND, plumb says what it is and exits.
.TP
.B KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT
Where \\fBplumb install\\fR points the kubeconfig it writes from the pod's service account.
.TP
.B PLUMB_DAEMON_SOCKET
The socket plumb-shim connects to (default /run/plumb/plumb.sock, \\fBplumb daemon --socket\\fR).
[FILES]
.TP
.I /etc/cni/net.d/00-plumb.conflist
The conflist \\fBplumb install\\fR writes around the node's primary CNI config, with its
kubeconfig in \\fI/etc/cni/net.d/plumb.d/\\fR.
.TP
.I /usr/share/plumb/deploy/
The manifests that install plumb on a Kubernetes cluster.
[SEE ALSO]
The README in \\fI/usr/share/doc/plumb/\\fR.
")
file(WRITE "${OUT}.h2m" "${page}")
execute_process(COMMAND "${HELP2MAN}" --no-info --section=8
                        "--name=CNI plugin and node daemon of the Network Plumbing WG standard"
                        "--include=${OUT}.h2m" "--output=${OUT}" "${PLUMB}"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "help2man failed (${rc})")
endif()
execute_process(COMMAND "${GZIP}" -9nf -k "${OUT}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gzip ${OUT} failed (${rc})")
endif()
