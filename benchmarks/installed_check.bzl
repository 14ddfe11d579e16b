"""A check that a Debian package the benchmarks link against is installed."""

def debian_header_check(name, header, package):
    """A genrule making `name`.h, a header every compile of a dependent needs.

    It fails, naming `package` and scripts/install_deps.sh --bench, when
    `header` (a file of that package) is missing, so such a build stops with
    that message instead of in the compiler ("No such file or directory").
    Manual, as the libraries that use it.
    """
    native.genrule(
        name = name,
        outs = [name + ".h"],
        cmd = "$(location installed_check.sh) %s %s $@" % (header, package),
        tags = ["manual"],
        tools = ["installed_check.sh"],
    )
