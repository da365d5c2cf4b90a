from ckptfix import layout


def test_batch_names_follow_java_parse_long() -> None:
    assert layout.parse_batch_name("7") == 7
    assert layout.parse_batch_name("0007") == 7  # accepted, but not canonical
    assert layout.parse_batch_name("+7") == 7
    assert layout.parse_batch_name("-1") == -1
    assert layout.parse_batch_name(".7.crc") is None
    assert layout.parse_batch_name("7.tmp") is None
    assert layout.parse_batch_name(str(2**63)) is None  # overflows a Java long


def test_sidecars_and_temp_names() -> None:
    assert layout.hadoop_crc_target(".12.crc") == "12"
    assert layout.hadoop_crc_target("12.crc") is None
    assert layout.is_temp(".1.f7672dba-dabd-4bcd-90ba-8bd464c861bf.tmp")
    assert layout.checksum_sidecar_target("20_bf8e9e9a-69ea-4231-bcec-812ed72870c1.changelog.crc") == (
        "20_bf8e9e9a-69ea-4231-bcec-812ed72870c1.changelog"
    )
    assert layout.checksum_sidecar_target(".1.delta.crc") is None


def test_state_file_names() -> None:
    assert layout.parse_state_file("12.snapshot") == layout.StateFileName(12, "snapshot", None)
    v2 = layout.parse_state_file("9_a2d44ee4-64d7-48fb-a3e7-c3a0846e9697.zip")
    assert v2 == layout.StateFileName(9, "zip", "a2d44ee4-64d7-48fb-a3e7-c3a0846e9697")
    assert layout.parse_state_file("temp-1234567.tmp") is None
    assert layout.state_file_name(9, "zip", v2.unique_id) == "9_a2d44ee4-64d7-48fb-a3e7-c3a0846e9697.zip"
