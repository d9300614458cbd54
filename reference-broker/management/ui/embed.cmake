# Writes the management UI's page (INPUT) into a C++ source file (OUTPUT) as one string, so that the broker serves
# it from memory: no files to install beside the binary, and no build toolchain for the UI.
file(READ "${INPUT}" page)
file(WRITE "${OUTPUT}" "// Generated from reference-broker/management/ui/index.html by ui/embed.cmake; edit that file.\n"
                       "#include \"reference-broker/management/management_ui.h\"\n\n"
                       "namespace firemq {\n"
                       "const std::string_view kManagementPage = R\"FIREMQ_UI(${page})FIREMQ_UI\";\n"
                       "}  // namespace firemq\n")
