import CBluectlShim
enum P {}
