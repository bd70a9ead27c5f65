pub fn run() -> Result<(), crate::CliError> {
    Ok(())
}
