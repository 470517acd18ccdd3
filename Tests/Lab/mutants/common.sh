# Sourced by the mutants: the real bluectl they wrap (the one Scripts/lab built).
REAL=${REAL_BLUECTL:-${REPO:?}/.build-lab/release/bluectl}
