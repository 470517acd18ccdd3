enum BluectlCLIPlaceholder {}
